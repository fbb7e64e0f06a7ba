// biome-ignore-all lint/suspicious/noExplicitAny: the probes read loosely typed objects
import { randomBytes, randomUUID } from 'node:crypto';
import { stringify } from 'yaml';
import type { ControllerName } from '../../src/controllers/index.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { type Http, HttpError } from './rbac-support.ts';

/**
 * Fast checks of each feature of the operator, as the e2e tests of each component make them,
 * reduced to what shows that its permissions work: every request the feature needs is made,
 * and the result is observable. Each probe runs against a fresh set of objects.
 */

export const GROUP = 'management.platform';
export const V1 = `${GROUP}/v1`;
const MP = `/apis/${GROUP}/v1`;
export const ssPath = (ns: string, name = '') => `${MP}/namespaces/${ns}/sharedsecrets${name && `/${name}`}`;
export const clusterPath = (plural: string, name = '') => `${MP}/${plural}${name && `/${name}`}`;
export const corePath = (ns: string, plural: string, name = '') =>
  `/api/v1/namespaces/${ns}/${plural}${name && `/${name}`}`;
const nsPath = (name: string) => `/api/v1/namespaces/${name}`;
const rbacPath = (ns: string, plural: string) =>
  `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/${plural}`;
const b64 = (text: string) => Buffer.from(text).toString('base64');

export interface Setting {
  /** The platform namespace. */
  namespace: string;
  leaseName: string;
  /** The configuration's `projectNamespacePrefix` (the chart's config values set it). */
  projectPrefix: string;
  webhookServingSecret: string;
  pepperSecret: string;
  webhookConfigurations: { validating: string; mutating: string };
  /** Users and a team that exist before any probe (created by the test). */
  users: { alice: string; bob: string };
  team: string;
  virtual: { server: string; caPem: string; token: string };
}

export interface ProbeContext {
  /** Unique per run: probe objects are named after it. */
  id: string;
  /** The operator's leader election identity in this run. */
  identity: string;
  admin: Http;
  /** The chart's ServiceAccount (its token). */
  sa: Http;
  /** Admin of the virtual cluster. */
  virtual: Http;
  setting: Setting;
  /** The gateway's base URL, when the probe asked for it (`needs.gateway`). */
  gatewayUrl?: string;
  /** Admin clean-ups, run after the probe (with no admission webhooks registered). */
  cleanup: Array<() => Promise<unknown>>;
  state: Record<string, any>;
}

export interface Step {
  what: string;
  run?: (ctx: ProbeContext) => Promise<unknown>;
  /** Polled until true. */
  until?: (ctx: ProbeContext) => Promise<boolean>;
}

export interface Probe {
  id: string;
  /**
   * The operator this probe needs (it always serves the admission webhooks; `gateway` adds the
   * management gateway on a free port, for gateway probes); null: none.
   */
  needs: { controllers: ControllerName[]; leaderElect?: boolean; gateway?: boolean } | null;
  /** Admin preparation, before the operator starts. */
  before?: (ctx: ProbeContext) => Promise<void>;
  steps: (ctx: ProbeContext) => Step[];
}

const conditionOf = (object: any, type: string) =>
  (object?.status?.conditions ?? []).find((c: any) => c.type === type);
/** `type` is True and speaks of the current generation. */
const isTrueAndCurrent = (object: any, type: string) => {
  const condition = conditionOf(object, type);
  return condition?.status === 'True' && condition.observedGeneration === object.metadata.generation;
};

/** Removes the finalizers, then deletes: the operator may be gone. */
const forceDelete = (admin: Http, path: string) => async () => {
  await admin.merge(path, { metadata: { finalizers: null } }).catch(() => {});
  await admin.delete(path);
};

const createNamespace = async (ctx: ProbeContext, name: string, client = ctx.admin) => {
  await client.create('/api/v1/namespaces', { metadata: { name } });
  ctx.cleanup.push(() => client.delete(nsPath(name)));
};

const sharedSecret = (name: string, spec: unknown) => ({
  apiVersion: V1,
  kind: 'SharedSecret',
  metadata: { name },
  spec,
});

const labelledSecret = (name: string, source: { name: string; namespace: string }) => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: {
    name,
    labels: {
      'management.platform/sharedsecret-name': source.name,
      'management.platform/sharedsecret-namespace': source.namespace,
    },
  },
});

const accessKey = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: V1,
  kind: 'OwnedAccessKey',
  metadata: { name },
  spec: { user: 'alice', type: 'User', ...spec },
});

/** SharedSecret projection: finalizer, Roles and RoleBindings per access rule, status, stale ones removed, cleanup on delete. */
const sharedSecretProbe: Probe = {
  id: 'sharedsecret',
  needs: { controllers: ['sharedsecret'] },
  before: (ctx) => createNamespace(ctx, `ss-${ctx.id}`),
  steps: (ctx) => {
    const ns = `ss-${ctx.id}`;
    const path = ssPath(ns, 's');
    const children = async (plural: string) => {
      const secret = await ctx.admin.get(path);
      if (!secret) return [];
      return ctx.admin.list(
        rbacPath(ns, plural),
        `management.platform/sharedsecret-uid=${secret.metadata.uid}`,
      );
    };
    const projected = async (count: number) =>
      (await children('roles')).length === count && (await children('rolebindings')).length === count;
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    return [
      {
        what: 'a SharedSecret with two access rules is projected into Roles and RoleBindings',
        run: () =>
          ctx.admin.create(
            ssPath(ns),
            sharedSecret('s', {
              data: { token: b64('v1') },
              access: [
                { name: 'all', verbs: ['*'], subresources: ['status'], users: [ctx.setting.users.alice] },
                { name: 'read', verbs: ['get'], teams: [ctx.setting.team] },
              ],
            }),
          ),
        until: async () => {
          const secret = await ctx.admin.get(path);
          return (
            secret?.metadata.finalizers?.includes('management.platform/cleanup') &&
            isTrueAndCurrent(secret, 'Ready') &&
            secret.status.dataKeys?.join() === 'token' &&
            (await projected(2))
          );
        },
      },
      {
        what: 'removing a rule removes its Role and RoleBinding',
        run: () => ctx.admin.jsonPatch(path, [{ op: 'remove', path: '/spec/access/1' }]),
        until: async () => isTrueAndCurrent(await ctx.admin.get(path), 'Ready') && projected(1),
      },
      {
        what: 'deleting the SharedSecret removes its children and then the finalizer',
        run: () => ctx.admin.delete(path),
        until: async () =>
          (await ctx.admin.get(path)) === null &&
          (await ctx.admin.list(rbacPath(ns, 'roles'))).length === 0 &&
          (await ctx.admin.list(rbacPath(ns, 'rolebindings'))).length === 0,
      },
    ];
  },
};

/** Admission looks users and teams up (warnings for missing ones). */
const admissionIdentitiesProbe: Probe = {
  id: 'admission-identities',
  needs: { controllers: [] },
  steps: (ctx) => [
    {
      what: 'admission warns about a user and a team that do not exist',
      until: async () => {
        const answer = await ctx.admin.call('POST', `${ssPath('default')}?dryRun=All`, {
          body: sharedSecret(`w-${ctx.id}`, {
            access: [{ verbs: ['get'], users: [`ghost-${ctx.id}`], teams: [`ghosts-${ctx.id}`] }],
          }),
        });
        const warnings = [answer.headers.warning ?? []].flat().join('\n');
        return (
          answer.status === 201 &&
          warnings.includes(`user \\"ghost-${ctx.id}\\" does not exist`) &&
          warnings.includes(`team \\"ghosts-${ctx.id}\\" does not exist`)
        );
      },
    },
  ],
};

/** Secret sync: a labelled Secret (admitted after a SubjectAccessReview) is filled from its SharedSecret. */
const secretSyncProbe: Probe = {
  id: 'secret-sync',
  needs: { controllers: ['secretsync'] },
  before: (ctx) => createNamespace(ctx, `sync-${ctx.id}`),
  steps: (ctx) => {
    const ns = `sync-${ctx.id}`;
    return [
      {
        what: 'a Secret labelled with a SharedSecret gets its data',
        run: async () => {
          ctx.cleanup.push(forceDelete(ctx.admin, ssPath(ns, 'src')));
          await ctx.admin.create(ssPath(ns), sharedSecret('src', { data: { k: b64('v') } }));
          await ctx.admin.create(
            corePath(ns, 'secrets'),
            labelledSecret('dst', { name: 'src', namespace: ns }),
          );
        },
        until: async () => (await ctx.admin.get(corePath(ns, 'secrets', 'dst')))?.data?.k === b64('v'),
      },
    ];
  },
};

/** Events: a Warning about a sync target whose SharedSecret is missing, and its repeat as a series. */
const eventsProbe: Probe = {
  id: 'events',
  needs: { controllers: ['secretsync'] },
  before: (ctx) => createNamespace(ctx, `ev-${ctx.id}`),
  steps: (ctx) => {
    const ns = `ev-${ctx.id}`;
    const event = async () =>
      (await ctx.admin.list(`/apis/events.k8s.io/v1/namespaces/${ns}/events`)).find(
        (e: any) => e.regarding?.name === 'orphan' && e.reason === 'SharedSecretNotFound',
      );
    return [
      {
        what: 'an Event is recorded',
        run: () =>
          ctx.admin.create(
            corePath(ns, 'secrets'),
            labelledSecret('orphan', { name: 'missing', namespace: ns }),
          ),
        until: async () => (await event()) !== undefined,
      },
      {
        what: 'its repeat updates the Event series',
        run: () =>
          ctx.admin.merge(corePath(ns, 'secrets', 'orphan'), {
            metadata: { annotations: { 'e2e/touch': '1' } },
          }),
        until: async () => ((await event())?.series?.count ?? 0) >= 2,
      },
    ];
  },
};

/** Access keys: hashed at admission with the pepper (created on first use), expiry recorded, expired keys deleted. */
const accessKeysProbe: Probe = {
  id: 'access-keys',
  needs: { controllers: ['accesskey'] },
  before: (ctx) => ctx.admin.delete(corePath(ctx.setting.namespace, 'secrets', ctx.setting.pepperSecret)),
  steps: (ctx) => {
    const kept = clusterPath('ownedaccesskeys', `ka-${ctx.id}`);
    const expiring = clusterPath('ownedaccesskeys', `kb-${ctx.id}`);
    ctx.cleanup.push(
      () => ctx.admin.delete(kept),
      () => ctx.admin.delete(expiring),
    );
    return [
      {
        what: 'a key is created (pepper Secret created) and its expiry recorded in status',
        run: () =>
          ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            accessKey(`ka-${ctx.id}`, { key: generateAccessKey(randomBytes).key, ttl: 3600 }),
          ),
        until: async () =>
          Boolean((await ctx.admin.get(kept))?.status?.expirationTimestamp) &&
          (await ctx.admin.get(corePath(ctx.setting.namespace, 'secrets', ctx.setting.pepperSecret))) !==
            null,
      },
      {
        what: 'an expired key is deleted',
        run: () =>
          ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            accessKey(`kb-${ctx.id}`, { key: generateAccessKey(randomBytes).key, ttl: 1 }),
          ),
        until: async () => (await ctx.admin.get(expiring)) === null,
      },
    ];
  },
};

/** Team membership: User.status.teams follows the Teams that list the user. */
const teamMembershipProbe: Probe = {
  id: 'team-membership',
  needs: { controllers: ['teammembership'] },
  steps: (ctx) => {
    const user = `tu-${ctx.id}`;
    const team = `tt-${ctx.id}`;
    ctx.cleanup.push(
      () => ctx.admin.delete(clusterPath('users', user)),
      () => ctx.admin.delete(clusterPath('teams', team)),
    );
    return [
      {
        what: "a Team's member gets it in User.status.teams",
        run: async () => {
          await ctx.admin.create(clusterPath('users'), {
            apiVersion: V1,
            kind: 'User',
            metadata: { name: user },
            spec: {},
          });
          await ctx.admin.create(clusterPath('teams'), {
            apiVersion: V1,
            kind: 'Team',
            metadata: { name: team },
            spec: { users: [user] },
          });
        },
        until: async () => (await ctx.admin.get(clusterPath('users', user)))?.status?.teams?.join() === team,
      },
    ];
  },
};

/** Projects: namespace, member RoleBindings to the three project roles, status, repair, removal, deletion. */
const projectsProbe: Probe = {
  id: 'projects',
  needs: { controllers: ['project'] },
  steps: (ctx) => {
    const name = `pr-${ctx.id}`;
    const path = clusterPath('projects', name);
    const namespace = `${ctx.setting.projectPrefix}${name}`;
    const boundRoles = async () =>
      (await ctx.admin.list(rbacPath(namespace, 'rolebindings'), `management.platform/project=${name}`))
        .map((b: any) => b.roleRef.name)
        .sort()
        .join();
    ctx.cleanup.push(forceDelete(ctx.admin, path), () => ctx.admin.delete(nsPath(namespace)));
    return [
      {
        what: 'a Project gets its namespace and member RoleBindings, and Ready',
        run: () =>
          ctx.admin.create(clusterPath('projects'), {
            apiVersion: V1,
            kind: 'Project',
            metadata: { name },
            spec: {
              owner: { user: ctx.setting.users.alice },
              members: [
                { kind: 'User', name: ctx.setting.users.bob, clusterRole: 'platform-project-user' },
                { kind: 'Team', name: ctx.setting.team, clusterRole: 'platform-project-viewer' },
              ],
            },
          }),
        until: async () => {
          const project = await ctx.admin.get(path);
          const ns = await ctx.admin.get(nsPath(namespace));
          return (
            project?.metadata.finalizers?.includes('management.platform/cleanup') &&
            isTrueAndCurrent(project, 'Ready') &&
            project.status.namespace === namespace &&
            ns?.metadata.ownerReferences?.[0]?.uid === project.metadata.uid &&
            (await boundRoles()) === 'platform-project-admin,platform-project-user,platform-project-viewer'
          );
        },
      },
      {
        what: 'a changed project namespace is repaired',
        run: () =>
          ctx.admin.jsonPatch(nsPath(namespace), [
            { op: 'replace', path: '/metadata/ownerReferences/0/blockOwnerDeletion', value: false },
          ]),
        until: async () =>
          (await ctx.admin.get(nsPath(namespace)))?.metadata.ownerReferences?.[0]?.blockOwnerDeletion ===
          true,
      },
      {
        what: "a removed member's RoleBinding is deleted",
        run: () => ctx.admin.jsonPatch(path, [{ op: 'remove', path: '/spec/members/1' }]),
        until: async () => (await boundRoles()) === 'platform-project-admin,platform-project-user',
      },
      {
        what: 'deleting the Project deletes its namespace, then the finalizer',
        run: () => ctx.admin.delete(path),
        until: async () => {
          const ns = await ctx.admin.get(nsPath(namespace));
          return (
            (await ctx.admin.get(path)) === null && (ns === null || Boolean(ns.metadata.deletionTimestamp))
          );
        },
      },
    ];
  },
};

/** A project whose namespace exists and is someone else's: Ready=False, NamespaceConflict (read with a GET). */
const projectConflictProbe: Probe = {
  id: 'project-conflict',
  needs: { controllers: ['project'] },
  before: (ctx) => createNamespace(ctx, `${ctx.setting.projectPrefix}pq-${ctx.id}`),
  steps: (ctx) => {
    const path = clusterPath('projects', `pq-${ctx.id}`);
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    return [
      {
        what: 'a Project whose namespace is taken reports NamespaceConflict',
        run: () =>
          ctx.admin.create(clusterPath('projects'), {
            apiVersion: V1,
            kind: 'Project',
            metadata: { name: `pq-${ctx.id}` },
            spec: { owner: { user: ctx.setting.users.alice } },
          }),
        until: async () => conditionOf(await ctx.admin.get(path), 'Ready')?.reason === 'NamespaceConflict',
      },
    ];
  },
};

/** The syncer identity objects the virtual cluster controller labels. */
const SYNCER_SELECTOR = 'management.platform/virtualclusterinstance-uid';

const SYNCED = [
  { kind: 'ConfigMap', plural: 'configmaps' },
  { kind: 'Secret', plural: 'secrets' },
  { kind: 'Service', plural: 'services' },
  { kind: 'Endpoints', plural: 'endpoints' },
] as const;

/** A virtual object of each synced kind, named `name`. */
function virtualObject(
  kind: (typeof SYNCED)[number]['kind'],
  name: string,
  annotations: Record<string, string> = {},
) {
  const metadata = { name, annotations };
  switch (kind) {
    case 'ConfigMap':
      return { apiVersion: 'v1', kind, metadata, data: { k: 'v' } };
    case 'Secret':
      return { apiVersion: 'v1', kind, metadata, data: { k: b64('v') } };
    case 'Service':
      return { apiVersion: 'v1', kind, metadata, spec: { ports: [{ name: 'p', port: 5432 }] } };
    case 'Endpoints':
      return {
        apiVersion: 'v1',
        kind,
        metadata,
        subsets: [{ addresses: [{ ip: '10.1.0.5' }], ports: [{ name: 'p', port: 5432 }] }],
      };
  }
}

/**
 * A VirtualClusterInstance: credentials read, the Syncing condition written, and the syncer's
 * host copies of ConfigMaps, Secrets, Services and Endpoints created, updated, deleted, and a
 * conflicting host object reported (which takes a GET of it).
 */
const virtualClusterProbe: Probe = {
  id: 'virtual-cluster',
  needs: { controllers: ['virtualcluster'] },
  before: async (ctx) => {
    const host = `vc-${ctx.id}`;
    const apps = `apps-${ctx.id}`;
    await createNamespace(ctx, host);
    await createNamespace(ctx, apps, ctx.virtual);
    await ctx.admin.create(corePath(host, 'secrets'), {
      metadata: { name: 'creds' },
      data: { token: b64(ctx.setting.virtual.token) },
    });
    // Host objects in the way of the virtual objects named `c`.
    for (const { kind, plural } of SYNCED) {
      const object = virtualObject(kind, hostNameLong('c', apps, 'vc'));
      await ctx.admin.create(corePath(host, plural), object);
    }
  },
  steps: (ctx) => {
    const host = `vc-${ctx.id}`;
    const apps = `apps-${ctx.id}`;
    const path = `${MP}/namespaces/${host}/virtualclusterinstances/vc`;
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    const hostCopy = (plural: string, name: string) =>
      ctx.admin.get(corePath(host, plural, hostNameLong(name, apps, 'vc')));
    const everyKind = (fn: (kind: (typeof SYNCED)[number]) => Promise<unknown>) =>
      Promise.all(SYNCED.map(fn));
    const allCopies = async (check: (copy: any) => boolean) =>
      (await everyKind(async ({ plural }) => check(await hostCopy(plural, 'a')))).every(Boolean);
    return [
      {
        what: 'the instance syncs (Syncing=True for its generation)',
        run: () =>
          ctx.admin.create(`${MP}/namespaces/${host}/virtualclusterinstances`, {
            apiVersion: V1,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: {
              endpoint: ctx.setting.virtual.server,
              caData: b64(ctx.setting.virtual.caPem),
              credentialsSecretRef: { name: 'creds' },
              config: stringify({
                sync: {
                  toHost: {
                    services: { enabled: true },
                    endpoints: { enabled: true },
                    configMaps: { enabled: true },
                    secrets: { enabled: true },
                  },
                },
              }),
            },
          }),
        until: async () => isTrueAndCurrent(await ctx.admin.get(path), 'Syncing'),
      },
      {
        what: 'virtual objects are copied to the host',
        run: () =>
          everyKind(({ kind, plural }) =>
            ctx.virtual.create(corePath(apps, plural), virtualObject(kind, 'a')),
          ),
        until: () => allCopies((copy) => copy !== null),
      },
      {
        what: 'changes reach the host copies',
        run: () =>
          everyKind(({ plural }) =>
            ctx.virtual.merge(corePath(apps, plural, 'a'), {
              metadata: { annotations: { 'e2e.platform/v': '2' } },
            }),
          ),
        until: () => allCopies((copy) => copy?.metadata.annotations?.['e2e.platform/v'] === '2'),
      },
      {
        // Endpoints first: deleting a Service deletes its Endpoints (the apiserver does).
        what: 'a deleted virtual Endpoints is deleted on the host',
        run: () => ctx.virtual.delete(corePath(apps, 'endpoints', 'a')),
        until: async () => (await hostCopy('endpoints', 'a')) === null,
      },
      {
        what: 'deleted virtual objects are deleted on the host',
        run: () => everyKind(({ plural }) => ctx.virtual.delete(corePath(apps, plural, 'a'))),
        until: () => allCopies((copy) => copy === null),
      },
      {
        what: 'host objects in the way are reported as conflicts',
        run: () =>
          everyKind(({ kind, plural }) =>
            ctx.virtual.create(corePath(apps, plural), virtualObject(kind, 'c')),
          ),
        until: async () => {
          const syncing = conditionOf(await ctx.admin.get(path), 'Syncing');
          const message: string = syncing?.reason === 'SyncError' ? syncing.message : '';
          // (Messages about Secrets name the reason only.)
          return SYNCED.every(({ kind }) => message.includes(`${kind} ${apps}/c: HostObjectConflict`));
        },
      },
      {
        what: "deleting the instance removes its syncer's ServiceAccount and RoleBindings, then the instance",
        run: () => ctx.admin.delete(path),
        until: async () =>
          (await ctx.admin.get(path)) === null &&
          (await ctx.admin.list(corePath(host, 'serviceaccounts'), SYNCER_SELECTOR)).length === 0 &&
          (await ctx.admin.list(rbacPath(host, 'rolebindings'), SYNCER_SELECTOR)).length === 0,
      },
    ];
  },
};

/**
 * A connected Cluster (the virtual cluster's apiserver, reached with its admin token): its
 * credentials Secret read and the Ready condition written for the current generation.
 */
const clusterProbe: Probe = {
  id: 'cluster',
  needs: { controllers: ['cluster'] },
  before: async (ctx) => {
    const ns = `cl-${ctx.id}`;
    await createNamespace(ctx, ns);
    await ctx.admin.create(corePath(ns, 'secrets'), {
      metadata: { name: 'creds' },
      data: { token: b64(ctx.setting.virtual.token) },
    });
  },
  steps: (ctx) => {
    const name = `cl-${ctx.id}`;
    const path = clusterPath('clusters', name);
    ctx.cleanup.push(() => ctx.admin.delete(path));
    return [
      {
        what: 'a Cluster the platform reaches is Ready for its generation',
        run: () =>
          ctx.admin.create(clusterPath('clusters'), {
            apiVersion: V1,
            kind: 'Cluster',
            metadata: { name },
            spec: {
              endpoint: ctx.setting.virtual.server,
              caData: b64(ctx.setting.virtual.caPem),
              credentialsSecretRef: { name: 'creds', namespace: `cl-${ctx.id}` },
            },
          }),
        until: async () => {
          const cluster = await ctx.admin.get(path);
          return isTrueAndCurrent(cluster, 'Ready') && conditionOf(cluster, 'Ready').reason === 'Reachable';
        },
      },
    ];
  },
};

/** Leader election: the Lease is created, held and renewed. */
const leaderElectionProbe: Probe = {
  id: 'leader-election',
  needs: { controllers: [], leaderElect: true },
  before: (ctx) =>
    ctx.admin.delete(
      `/apis/coordination.k8s.io/v1/namespaces/${ctx.setting.namespace}/leases/${ctx.setting.leaseName}`,
    ),
  steps: (ctx) => {
    const lease = () =>
      ctx.admin.get(
        `/apis/coordination.k8s.io/v1/namespaces/${ctx.setting.namespace}/leases/${ctx.setting.leaseName}`,
      );
    return [
      {
        what: 'the operator takes the Lease',
        until: async () => {
          const current = await lease();
          ctx.state.renewTime = current?.spec?.renewTime;
          return current?.spec?.holderIdentity === ctx.identity;
        },
      },
      {
        what: 'the operator renews the Lease',
        until: async () => {
          const current = await lease();
          return (
            current?.spec?.holderIdentity === ctx.identity && current.spec.renewTime !== ctx.state.renewTime
          );
        },
      },
    ];
  },
};

/**
 * Operator-managed webhook certificates: a serving certificate that does not cover the webhook's
 * address (here: the CA's own certificate in its place) is renewed on start, replacing the Secret.
 */
const webhookCertificatesProbe: Probe = {
  id: 'webhook-certificates',
  needs: { controllers: [] },
  before: async (ctx) => {
    const path = corePath(ctx.setting.namespace, 'secrets', ctx.setting.webhookServingSecret);
    const secret = await ctx.admin.get(path);
    if (!secret) return;
    ctx.state.wrongCertificate = secret.data['ca.crt'];
    await ctx.admin.ok('PUT', path, {
      body: { ...secret, data: { ...secret.data, 'tls.crt': secret.data['ca.crt'] } },
    });
  },
  steps: (ctx) => [
    {
      what: 'the serving Secret holds a new serving certificate',
      until: async () => {
        const secret = await ctx.admin.get(
          corePath(ctx.setting.namespace, 'secrets', ctx.setting.webhookServingSecret),
        );
        const certificate = secret?.data?.['tls.crt'];
        return (
          certificate !== undefined &&
          certificate !== ctx.state.wrongCertificate &&
          Buffer.from(certificate, 'base64').toString().includes('BEGIN CERTIFICATE')
        );
      },
    },
  ],
};

/** The webhook configurations: recreated when deleted, with the CA bundle. */
const webhookConfigurationsProbe: Probe = {
  id: 'webhook-configurations',
  needs: { controllers: [] },
  before: async (ctx) => {
    const { validating, mutating } = ctx.setting.webhookConfigurations;
    await ctx.admin.delete(
      `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${validating}`,
    );
    await ctx.admin.delete(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${mutating}`);
  },
  steps: (ctx) => [
    {
      what: 'both configurations exist with the CA bundle',
      until: async () => {
        const { validating, mutating } = ctx.setting.webhookConfigurations;
        const configurations = await Promise.all([
          ctx.admin.get(
            `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${validating}`,
          ),
          ctx.admin.get(`/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${mutating}`),
        ]);
        return configurations.every((c) => c?.webhooks?.every((w: any) => Boolean(w.clientConfig.caBundle)));
      },
    },
  ],
};

/**
 * The gateway calls kube-apiserver as the key's user: user, groups and the access-key extra.
 * Until the gateway's own e2e probe can run here, a SelfSubjectReview with those headers, sent
 * as the ServiceAccount, shows that the chart lets it impersonate exactly that.
 */
const gatewayImpersonationProbe: Probe = {
  id: 'gateway-impersonation',
  needs: null,
  steps: (ctx) => [
    {
      what: 'the ServiceAccount acts as a user with groups and the access-key extra',
      until: async () => {
        const answer = await ctx.sa.call('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
          body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
          headers: {
            'Impersonate-User': ctx.setting.users.alice,
            'Impersonate-Group': [`platform:user:${ctx.setting.users.alice}`, 'platform:authenticated'],
            'Impersonate-Extra-management.platform%2faccess-key': `key-${ctx.id}`,
          },
        });
        const info = answer.body?.status?.userInfo;
        return (
          answer.status === 201 &&
          info?.username === ctx.setting.users.alice &&
          info.groups?.includes(`platform:user:${ctx.setting.users.alice}`) &&
          info.extra?.['management.platform/access-key']?.[0] === `key-${ctx.id}`
        );
      },
    },
  ],
};

/**
 * Users who are not platform admins manage their own keys through the gateway, which then acts
 * as itself: create, get, update and patch of OwnedAccessKeys as the ServiceAccount.
 */
const gatewayOwnKeysProbe: Probe = {
  id: 'gateway-own-keys',
  needs: { controllers: [] },
  steps: (ctx) => {
    const name = `kg-${ctx.id}`;
    const path = clusterPath('ownedaccesskeys', name);
    ctx.cleanup.push(() => ctx.admin.delete(path));
    return [
      {
        what: 'create',
        run: () =>
          ctx.sa.create(
            clusterPath('ownedaccesskeys'),
            accessKey(name, {
              keyId: generateAccessKey(randomBytes).id,
              keyHash: randomBytes(32).toString('hex'),
            }),
          ),
      },
      { what: 'get', run: async () => (ctx.state.key = await ctx.sa.ok('GET', path)) },
      {
        what: 'update',
        // Read-modify-write: the access key controller writes the new key's status (its expiry
        // and Ready condition) meanwhile, and a stale resourceVersion is answered with 409.
        run: async () => {
          for (let attempt = 1; ; attempt++) {
            try {
              return await ctx.sa.ok('PUT', path, {
                body: { ...ctx.state.key, spec: { ...ctx.state.key.spec, description: 'u' } },
              });
            } catch (err) {
              if (!(err instanceof HttpError && err.status === 409) || attempt === 5) throw err;
              ctx.state.key = await ctx.sa.ok('GET', path);
            }
          }
        },
      },
      { what: 'patch', run: () => ctx.sa.merge(path, { spec: { displayName: 'p' } }) },
    ];
  },
};

/**
 * Unique key ids: admission claims a new key's id with a Lease, reads a claim in its way and takes
 * over a stale one (its key never came): here one acquired an hour ago for a key that does not
 * exist.
 */
const keyIdClaimsProbe: Probe = {
  id: 'key-id-claims',
  needs: { controllers: [] },
  steps: (ctx) => {
    const keyId = generateAccessKey(randomBytes).id;
    const name = `kc-${ctx.id}`;
    const claims = `/apis/coordination.k8s.io/v1/namespaces/${ctx.setting.namespace}/leases`;
    ctx.cleanup.push(() => ctx.admin.delete(clusterPath('ownedaccesskeys', name)));
    ctx.cleanup.push(() => ctx.admin.delete(`${claims}/accesskey-id-${keyId}`));
    return [
      {
        what: 'a stale claim of the id (its key never came)',
        run: () =>
          ctx.admin.create(claims, {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: {
              name: `accesskey-id-${keyId}`,
              ownerReferences: [{ apiVersion: V1, kind: 'OwnedAccessKey', name: 'gone', uid: randomUUID() }],
            },
            spec: {
              holderIdentity: 'gone',
              acquireTime: new Date(Date.now() - 3600_000).toISOString().replace('Z', '000Z'),
            },
          }),
      },
      {
        what: 'a key with that id is admitted: admission took the claim over',
        run: () =>
          ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            accessKey(name, { keyId, keyHash: randomBytes(32).toString('hex') }),
          ),
      },
    ];
  },
};

/** The gateway's kubeconfig endpoint reads the instance as itself (after a SubjectAccessReview). */
const gatewayKubeconfigProbe: Probe = {
  id: 'gateway-kubeconfig',
  needs: { controllers: [] },
  steps: (ctx) => {
    const ns = `kc-${ctx.id}`;
    const path = `${MP}/namespaces/${ns}/virtualclusterinstances/vc`;
    return [
      {
        what: 'an instance exists',
        run: async () => {
          await createNamespace(ctx, ns);
          await ctx.admin.create(`${MP}/namespaces/${ns}/virtualclusterinstances`, {
            apiVersion: V1,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: { accessPoint: { ingress: { enabled: true } }, endpoint: ctx.setting.virtual.server },
          });
        },
      },
      { what: 'get', run: () => ctx.sa.ok('GET', path) },
    ];
  },
};

export const PROBES: Probe[] = [
  sharedSecretProbe,
  admissionIdentitiesProbe,
  secretSyncProbe,
  eventsProbe,
  accessKeysProbe,
  teamMembershipProbe,
  projectsProbe,
  projectConflictProbe,
  virtualClusterProbe,
  clusterProbe,
  leaderElectionProbe,
  webhookCertificatesProbe,
  webhookConfigurationsProbe,
  gatewayImpersonationProbe,
  gatewayOwnKeysProbe,
  gatewayKubeconfigProbe,
  keyIdClaimsProbe,
];

/**
 * Which probe shows that a rule entry (`group/resource:verb[name]`) is needed: removing the
 * entry must make that probe fail. Where a permission serves several features, the probe named
 * is the one that exercises it most directly. Gateway rules have capability probes until the
 * gateway's own probe can run here (add it to PROBES and point its entries at it).
 */
export const PROBE_OF_ENTRY: Record<string, string> = {
  'management.platform/sharedsecrets:*': 'sharedsecret',
  'management.platform/sharedsecrets/status:*': 'sharedsecret',
  'management.platform/sharedsecrets/finalizers:update': 'sharedsecret',
  'management.platform/projects/finalizers:update': 'projects',
  'management.platform/ownedaccesskeys:list': 'access-keys',
  'management.platform/ownedaccesskeys:watch': 'access-keys',
  'management.platform/ownedaccesskeys:delete': 'access-keys',
  'management.platform/ownedaccesskeys/status:patch': 'access-keys',
  'management.platform/users:get': 'admission-identities',
  'management.platform/teams:get': 'admission-identities',
  'management.platform/users:list': 'team-membership',
  'management.platform/users:watch': 'team-membership',
  'management.platform/teams:list': 'team-membership',
  'management.platform/teams:watch': 'team-membership',
  'management.platform/users/status:patch': 'team-membership',
  'management.platform/projects:list': 'projects',
  'management.platform/projects:watch': 'projects',
  'management.platform/projects:patch': 'projects',
  'management.platform/projects/status:patch': 'projects',
  'management.platform/virtualclusterinstances:list': 'virtual-cluster',
  'management.platform/virtualclusterinstances:watch': 'virtual-cluster',
  'management.platform/virtualclusterinstances/status:patch': 'virtual-cluster',
  'management.platform/virtualclusterinstances:get': 'gateway-kubeconfig',
  'management.platform/clusters:list': 'cluster',
  'management.platform/clusters:watch': 'cluster',
  'management.platform/clusters/status:patch': 'cluster',
  ...Object.fromEntries(
    ['roles', 'rolebindings'].flatMap((resource) =>
      ['list', 'watch', 'create', 'patch', 'delete'].map((verb) => [
        `rbac.authorization.k8s.io/${resource}:${verb}`,
        'sharedsecret',
      ]),
    ),
  ),
  'rbac.authorization.k8s.io/clusterroles:bind[platform-project-admin]': 'projects',
  'rbac.authorization.k8s.io/clusterroles:bind[platform-project-user]': 'projects',
  'rbac.authorization.k8s.io/clusterroles:bind[platform-project-viewer]': 'projects',
  'core/namespaces:get': 'project-conflict',
  'core/namespaces:list': 'projects',
  'core/namespaces:watch': 'projects',
  'core/namespaces:create': 'projects',
  'core/namespaces:patch': 'projects',
  'core/namespaces:delete': 'projects',
  'core/secrets:list': 'secret-sync',
  'core/secrets:watch': 'secret-sync',
  'core/secrets:patch': 'secret-sync',
  'core/secrets:get': 'virtual-cluster',
  'core/secrets:create': 'access-keys',
  'core/secrets:update[platform-webhook-serving]': 'webhook-certificates',
  'management.platform/virtualclusterinstances:patch': 'virtual-cluster',
  'core/serviceaccounts:list': 'virtual-cluster',
  'core/serviceaccounts:watch': 'virtual-cluster',
  'core/serviceaccounts:create': 'virtual-cluster',
  'core/serviceaccounts:patch': 'virtual-cluster',
  'core/serviceaccounts:delete': 'virtual-cluster',
  'core/serviceaccounts/token:create': 'virtual-cluster',
  ...Object.fromEntries(
    ['services', 'endpoints', 'secrets', 'configmaps'].map((plural) => [
      `rbac.authorization.k8s.io/clusterroles:bind[platform-vcluster-syncer-${plural}]`,
      'virtual-cluster',
    ]),
  ),
  'events.k8s.io/events:create': 'events',
  'events.k8s.io/events:patch': 'events',
  'authorization.k8s.io/subjectaccessreviews:create': 'secret-sync',
  'admissionregistration.k8s.io/validatingwebhookconfigurations:create[platform-validating-webhooks]':
    'webhook-configurations',
  'admissionregistration.k8s.io/validatingwebhookconfigurations:patch[platform-validating-webhooks]':
    'webhook-configurations',
  'admissionregistration.k8s.io/mutatingwebhookconfigurations:create[platform-mutating-webhooks]':
    'webhook-configurations',
  'admissionregistration.k8s.io/mutatingwebhookconfigurations:patch[platform-mutating-webhooks]':
    'webhook-configurations',
  'coordination.k8s.io/leases:create': 'leader-election',
  'coordination.k8s.io/leases:get': 'key-id-claims',
  'coordination.k8s.io/leases:delete': 'key-id-claims',
  'coordination.k8s.io/leases:update[platform-operator]': 'leader-election',
  'core/users:impersonate': 'gateway-impersonation',
  'core/groups:impersonate': 'gateway-impersonation',
  'authentication.k8s.io/userextras/management.platform/access-key:impersonate': 'gateway-impersonation',
  'management.platform/ownedaccesskeys:get': 'gateway-own-keys',
  'management.platform/ownedaccesskeys:create': 'gateway-own-keys',
  'management.platform/ownedaccesskeys:update': 'gateway-own-keys',
  'management.platform/ownedaccesskeys:patch': 'gateway-own-keys',
};
