// biome-ignore-all lint/suspicious/noExplicitAny: the probes read loosely typed objects
import { randomBytes } from 'node:crypto';
import { parse, stringify } from 'yaml';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import type { ControllerName } from '../../src/controllers/index.ts';
import { virtualClusterShareGroup } from '../../src/controllers/virtualcluster/sharing.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { SIGNING_KEYS_SECRET } from '../../src/identity/signing-keys.ts';
import {
  OIDC_MODEL_LABEL,
  stateSecret,
  stateSecretName,
} from '../../src/login/oidc-provider/secret-models.ts';
import { secretNameOf } from '../../src/provision/control-plane.ts';
import {
  dataClaimNameOf,
  selectorLabelsOf,
  serviceNameOf,
  statefulSetNameOf,
} from '../../src/provision/in-cluster-render.ts';
import { assignKeys } from '../../src/runtime/assignment.ts';
import {
  keyLeaseName,
  memberLeaseName,
  SHARE_GROUP_LABEL,
  SHARE_ROLE_LABEL,
} from '../../src/runtime/lease-shares.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { ScriptedAgent } from '../login/support/browse.ts';
import { type ClusterManagerApi, startClusterManagerApi } from '../login/support/cluster-manager-api.ts';
import { accessProxyProbe, proxyWakeProbe } from './probes-access-proxy.ts';
import type { Http } from './rbac-support.ts';
import type { Component } from './support.ts';

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
  /** Each component's ServiceAccount (its token). */
  sa: Record<Component, Http>;
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
  /**
   * Why, when every probe runs against one operator, this one runs after the others, by itself:
   * what it does changes what the others rely on while it runs.
   */
  apart?: string;
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

const createNamespace = async (
  ctx: ProbeContext,
  name: string,
  client = ctx.admin,
  labels: Record<string, string> = {},
) => {
  await client.create('/api/v1/namespaces', { metadata: { name, labels } });
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

/** SharedSecret projection: Roles and RoleBindings per access rule (owned by the secret), status, stale ones removed. */
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
            isTrueAndCurrent(secret, 'Ready') &&
            secret.status.dataKeys?.join() === 'token' &&
            (await projected(2))
          );
        },
      },
      {
        what: "changing a rule's verbs and users updates its Role and RoleBinding",
        run: () =>
          ctx.admin.jsonPatch(path, [
            { op: 'replace', path: '/spec/access/0/verbs', value: ['get'] },
            { op: 'replace', path: '/spec/access/0/users', value: [ctx.setting.users.bob] },
          ]),
        until: async () => {
          const [roles, bindings] = [await children('roles'), await children('rolebindings')];
          const role = roles.find((r: any) => r.metadata.name.startsWith('ss-s-all-'));
          const binding = bindings.find((b: any) => b.metadata.name.startsWith('ss-s-all-'));
          return (
            JSON.stringify(role?.rules?.[0]?.verbs) === '["get"]' &&
            (binding?.subjects ?? []).some(
              (subject: any) => subject.name === `platform:user:${ctx.setting.users.bob}`,
            )
          );
        },
      },
      {
        what: 'removing a rule removes its Role and RoleBinding',
        run: () => ctx.admin.jsonPatch(path, [{ op: 'remove', path: '/spec/access/1' }]),
        until: async () => isTrueAndCurrent(await ctx.admin.get(path), 'Ready') && projected(1),
      },
      {
        // Its children are owned by it: the garbage collector removes them.
        what: 'deleting the SharedSecret removes it and its children',
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

/** Team membership: User.status.teams follows the Teams that list the user; the Team is Ready then. */
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
        what: "a Team's member gets it in User.status.teams, and the Team is Ready",
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
        until: async () =>
          (await ctx.admin.get(clusterPath('users', user)))?.status?.teams?.join() === team &&
          isTrueAndCurrent(await ctx.admin.get(clusterPath('teams', team)), 'Ready'),
      },
    ];
  },
};

/** The quota resource of a project's `spec.quotas.virtualClusterInstances`. */
const INSTANCE_COUNT = 'count/virtualclusterinstances.management.platform';

/** Projects: namespace, member RoleBindings to the three project roles, quota, status, repair, removal, deletion. */
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
    const quotaPath = `${nsPath(namespace)}/resourcequotas/platform-project-quota`;
    const quotaLimit = async () => (await ctx.admin.get(quotaPath))?.spec?.hard?.[INSTANCE_COUNT];
    ctx.cleanup.push(forceDelete(ctx.admin, path), () => ctx.admin.delete(nsPath(namespace)));
    return [
      {
        what: 'a Project gets its namespace, member RoleBindings and quota, and Ready',
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
              quotas: { virtualClusterInstances: 2 },
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
            (await boundRoles()) === 'platform-project-admin,platform-project-user,platform-project-viewer' &&
            (await quotaLimit()) === '2'
          );
        },
      },
      {
        what: "a project's quota edited by someone else is repaired",
        run: () =>
          ctx.admin.jsonPatch(quotaPath, [
            { op: 'replace', path: `/spec/hard/${INSTANCE_COUNT.replace('/', '~1')}`, value: '100' },
          ]),
        until: async () => (await quotaLimit()) === '2',
      },
      {
        what: "a project's quota unset removes its ResourceQuota",
        run: () => ctx.admin.jsonPatch(path, [{ op: 'remove', path: '/spec/quotas' }]),
        until: async () => (await ctx.admin.get(quotaPath)) === null,
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
/**
 * The VirtualClusterInstance `vc` of the setting's virtual cluster, its token in the Secret `creds`
 * beside it, syncing to the host what `toHost` enables (the virtual-cluster probes' one body).
 */
const syncingInstance = (setting: Setting, toHost: Record<string, { enabled: boolean }>) => ({
  apiVersion: V1,
  kind: 'VirtualClusterInstance',
  metadata: { name: 'vc' },
  spec: {
    endpoint: setting.virtual.server,
    caData: b64(setting.virtual.caPem),
    credentialsSecretRef: { name: 'creds' },
    config: stringify({ sync: { toHost } }),
  },
});

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
      // Headless: the test apiserver's service range is small, and every run adds Services.
      return {
        apiVersion: 'v1',
        kind,
        metadata,
        spec: { clusterIP: 'None', ports: [{ name: 'p', port: 5432 }] },
      };
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
 * conflicting host object reported (which takes a GET of it). In a project's namespace: under the
 * chart's admission policies a syncer's identity exists only there (templates/confinement.yaml).
 */
const virtualClusterProbe: Probe = {
  id: 'virtual-cluster',
  needs: { controllers: ['virtualcluster'] },
  before: async (ctx) => {
    const host = `vc-${ctx.id}`;
    const apps = `apps-${ctx.id}`;
    await createNamespace(ctx, host, ctx.admin, { 'management.platform/project': `vc-${ctx.id}` });
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
          ctx.admin.create(
            `${MP}/namespaces/${host}/virtualclusterinstances`,
            syncingInstance(ctx.setting, {
              services: { enabled: true },
              endpoints: { enabled: true },
              configMaps: { enabled: true },
              secrets: { enabled: true },
            }),
          ),
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
 * The virtual clusters shared between the controller's replicas (leader election on): the
 * replica's member Lease is created and renewed once the group's Leases are listed; an instance
 * gets a Lease of its own, held by the replica that syncs it; a replica that appears later (a
 * member Lease the admin writes, seen through the watch) is handed the instances assigned to it,
 * which come back when it goes; an instance's Lease is deleted with it.
 *
 * The replica that appears is a name only: nothing runs as it. The controller shares out every
 * instance there is, floor(K/2) or ceil(K/2) of K to each of two members, so that peer is handed
 * a share of the other probes' instances as well (at least one of them once there are four), and
 * nobody syncs those until it goes: the probe runs apart. The peer is chosen over every instance key
 * there is when it appears (not over this probe's key alone: with other keys present, the
 * balanced assignment may give this one to the operator, and the peer would never go).
 */
const virtualClusterSharesProbe: Probe = {
  id: 'virtual-cluster-shares',
  needs: { controllers: ['virtualcluster'], leaderElect: true },
  apart:
    "its peer replica is handed a share of every probe's instances, which nobody syncs while it is there",
  before: async (ctx) => {
    const ns = `vcs-${ctx.id}`;
    await createNamespace(ctx, ns, ctx.admin, { 'management.platform/project': ns });
    await ctx.admin.create(corePath(ns, 'secrets'), {
      metadata: { name: 'creds' },
      data: { token: b64(ctx.setting.virtual.token) },
    });
  },
  steps: (ctx) => {
    const ns = `vcs-${ctx.id}`;
    const group = virtualClusterShareGroup(ctx.setting.leaseName);
    const leases = `/apis/coordination.k8s.io/v1/namespaces/${ctx.setting.namespace}/leases`;
    const path = `${MP}/namespaces/${ns}/virtualclusterinstances/vc`;
    const key = `${ns}/vc`;
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    const keyLease = () => ctx.admin.get(`${leases}/${keyLeaseName(group, key)}`);
    const holderOfKey = async () => (await keyLease())?.spec?.holderIdentity ?? '';
    // A peer this instance is assigned to when it is a member beside the operator, over every
    // instance the controller shares out (its keys: namespace/name of each instance there is).
    const choosePeer = async (): Promise<string> => {
      const keys = (await ctx.admin.list(`${MP}/virtualclusterinstances`)).map(
        (instance) => `${instance.metadata.namespace}/${instance.metadata.name}`,
      );
      const candidates = Array.from({ length: 64 }, (_, n) => `probe-peer-${n + 1}`);
      const peer = candidates.find(
        (candidate) => assignKeys(keys, [ctx.identity, candidate]).get(key) === candidate,
      );
      if (!peer)
        throw new Error(`none of ${candidates.length} peers is assigned ${key} of ${keys.join(', ')}`);
      return peer;
    };
    const peerLease = (peer: string) => `${leases}/${memberLeaseName(group, peer)}`;
    return [
      {
        what: "the operator holds its member Lease of the virtual clusters' share group",
        until: async () =>
          (await ctx.admin.get(`${leases}/${memberLeaseName(group, ctx.identity)}`))?.spec?.holderIdentity ===
          ctx.identity,
      },
      {
        what: 'an instance gets a Lease of its own, held by the operator',
        run: () =>
          ctx.admin.create(
            `${MP}/namespaces/${ns}/virtualclusterinstances`,
            syncingInstance(ctx.setting, { services: { enabled: false }, endpoints: { enabled: false } }),
          ),
        until: async () => (await holderOfKey()) === ctx.identity,
      },
      {
        what: 'a replica that appears is handed the instance assigned to it (its Lease released)',
        run: async () => {
          const peer = await choosePeer();
          ctx.state.peer = peer;
          ctx.cleanup.push(() => ctx.admin.delete(peerLease(peer)));
          const now = new Date().toISOString().replace('Z', '000Z');
          return ctx.admin.create(leases, {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: {
              name: memberLeaseName(group, peer),
              labels: { [SHARE_GROUP_LABEL]: group, [SHARE_ROLE_LABEL]: 'member' },
            },
            spec: { holderIdentity: peer, leaseDurationSeconds: 3600, acquireTime: now, renewTime: now },
          });
        },
        until: async () => (await holderOfKey()) === '',
      },
      {
        what: 'the instance comes back when that replica goes',
        run: () => ctx.admin.delete(peerLease(ctx.state.peer)),
        until: async () => (await holderOfKey()) === ctx.identity,
      },
      {
        what: "the instance's Lease is deleted with it",
        run: () => ctx.admin.delete(path),
        until: async () => (await keyLease()) === null,
      },
    ];
  },
};

/**
 * Operator-managed webhook certificates: a serving certificate that does not cover the webhook's
 * address (here: the CA's own certificate in its place) is renewed on start, replacing the Secret;
 * the same edit made while the webhook runs is repaired when the Secret's watch event arrives.
 */
const webhookCertificatesProbe: Probe = {
  id: 'webhook-certificates',
  needs: { controllers: [] },
  before: breakServingCertificate,
  steps: () => [
    { what: 'the serving Secret holds a new serving certificate', until: servingCertificateRenewed },
    {
      what: "the running webhook repairs the same edit (the serving Secret's list and watch)",
      run: breakServingCertificate,
      until: servingCertificateRenewed,
    },
  ],
};

/** Puts the CA's own certificate in the serving certificate's place: it names no webhook address. */
async function breakServingCertificate(ctx: ProbeContext): Promise<void> {
  const path = corePath(ctx.setting.namespace, 'secrets', ctx.setting.webhookServingSecret);
  const secret = await ctx.admin.get(path);
  if (!secret) return;
  ctx.state.wrongCertificate = secret.data['ca.crt'];
  await ctx.admin.ok('PUT', path, {
    body: { ...secret, data: { ...secret.data, 'tls.crt': secret.data['ca.crt'] } },
  });
}

async function servingCertificateRenewed(ctx: ProbeContext): Promise<boolean> {
  const secret = await ctx.admin.get(
    corePath(ctx.setting.namespace, 'secrets', ctx.setting.webhookServingSecret),
  );
  const certificate = secret?.data?.['tls.crt'];
  return (
    certificate !== undefined &&
    certificate !== ctx.state.wrongCertificate &&
    Buffer.from(certificate, 'base64').toString().includes('BEGIN CERTIFICATE')
  );
}

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

/** A call to the gateway (plain HTTP here) with an access key; the status and the decoded body. */
async function gatewayCall(
  ctx: ProbeContext,
  method: string,
  path: string,
  key: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<{ status: number; body: any }> {
  if (!ctx.gatewayUrl) throw new Error('the gateway is not running');
  const answer = await fetch(`${ctx.gatewayUrl}/kubernetes/management${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      accept: 'application/json',
      ...(body === undefined ? {} : { 'content-type': contentType }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await answer.text();
  return { status: answer.status, body: text ? JSON.parse(text) : undefined };
}

/**
 * The management gateway, as a user who is not a platform admin uses it: her key authenticated
 * from the caches (keys, users, teams, the pepper, the configuration; projects for scopes), her
 * requests sent as her (impersonation), a direct token signed (the signing keys created), a
 * kubeconfig for her virtual cluster (a SubjectAccessReview, the instance read, a key of hers
 * created), her own keys managed through the gateway (which acts as itself after its ownership
 * check), and her key's last use recorded.
 */
const gatewayProbe: Probe = {
  id: 'gateway',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    // A project's namespace: a kubeconfig's key is scoped to the project's virtual cluster.
    const project = `gw-${ctx.id}`;
    const ns = `${ctx.setting.projectPrefix}${project}`;
    await ctx.admin.create(clusterPath('projects'), {
      apiVersion: V1,
      kind: 'Project',
      metadata: { name: project },
      spec: { owner: { user: ctx.setting.users.alice } },
    });
    ctx.cleanup.push(forceDelete(ctx.admin, clusterPath('projects', project)));
    await createNamespace(ctx, ns);
    await ctx.admin.delete(corePath(ctx.setting.namespace, 'secrets', SIGNING_KEYS_SECRET));
    const alice = ctx.setting.users.alice;
    await ctx.admin.create(rbacPath(ns, 'roles'), {
      metadata: { name: 'alice' },
      rules: [
        { apiGroups: [GROUP], resources: ['sharedsecrets'], verbs: ['list'] },
        { apiGroups: [GROUP], resources: ['virtualclusterinstances/kubeconfig'], verbs: ['create'] },
      ],
    });
    await ctx.admin.create(rbacPath(ns, 'rolebindings'), {
      metadata: { name: 'alice' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'alice' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `platform:user:${alice}` }],
    });
    await ctx.admin.create(`${MP}/namespaces/${ns}/virtualclusterinstances`, {
      apiVersion: V1,
      kind: 'VirtualClusterInstance',
      metadata: { name: 'vc' },
      spec: { accessPoint: { ingress: { enabled: true } }, endpoint: ctx.setting.virtual.server },
    });
  },
  steps: (ctx) => {
    const ns = `${ctx.setting.projectPrefix}gw-${ctx.id}`;
    const keyName = `ga-${ctx.id}`;
    const ownKey = `gb-${ctx.id}`;
    const generated = generateAccessKey(randomBytes);
    ctx.cleanup.push(
      () => ctx.admin.delete(clusterPath('ownedaccesskeys', keyName)),
      () => ctx.admin.delete(clusterPath('ownedaccesskeys', ownKey)),
    );
    const call = (method: string, path: string, body?: unknown, contentType?: string) =>
      gatewayCall(ctx, method, path, generated.key, body, contentType);
    return [
      {
        what: "alice's key (hashed at admission) is accepted by the gateway",
        run: () =>
          ctx.admin.create(clusterPath('ownedaccesskeys'), accessKey(keyName, { key: generated.key })),
        until: async () => (await call('GET', '/apis')).status === 200,
      },
      {
        what: 'alice lists SharedSecrets through the gateway, as herself',
        until: async () => (await call('GET', `${MP}/namespaces/${ns}/sharedsecrets`)).status === 200,
      },
      {
        what: 'alice gets a direct cluster endpoint token (signed with a key the gateway created)',
        until: async () =>
          (
            await call('POST', `${MP}/directclusterendpointtokens`, {
              apiVersion: V1,
              kind: 'DirectClusterEndpointToken',
              spec: { ttl: 600 },
            })
          ).status === 201,
      },
      {
        what: 'alice gets a kubeconfig for her virtual cluster',
        until: async () =>
          (
            await call('POST', `${MP}/namespaces/${ns}/virtualclusterinstances/vc/kubeconfig`, {
              apiVersion: V1,
              kind: 'VirtualClusterInstanceKubeConfig',
              spec: {},
            })
          ).status === 201,
      },
      {
        what: 'alice creates, reads, updates and patches a key of her own through the gateway',
        run: async () => {
          const created = await call(
            'POST',
            `${MP}/ownedaccesskeys`,
            accessKey(ownKey, { description: 'created through the gateway' }),
          );
          if (created.status !== 201) throw new Error(`create: ${created.status}`);
          const read = await call('GET', `${MP}/ownedaccesskeys/${ownKey}`);
          if (read.status !== 200) throw new Error(`get: ${read.status}`);
          // Read-modify-write: the access key controller may write its status meanwhile (409).
          let current = read.body;
          for (let attempt = 1; ; attempt++) {
            const updated = await call('PUT', `${MP}/ownedaccesskeys/${ownKey}`, {
              ...current,
              spec: { ...current.spec, description: 'updated' },
            });
            if (updated.status === 200) break;
            if (updated.status !== 409 || attempt === 5) throw new Error(`update: ${updated.status}`);
            current = (await call('GET', `${MP}/ownedaccesskeys/${ownKey}`)).body;
          }
          const patched = await call(
            'PATCH',
            `${MP}/ownedaccesskeys/${ownKey}`,
            { spec: { displayName: 'patched' } },
            'application/merge-patch+json',
          );
          if (patched.status !== 200) throw new Error(`patch: ${patched.status}`);
        },
      },
      {
        what: 'alice deletes a key of her own through the gateway',
        run: async () => {
          const name = `${ownKey}-gone`;
          const created = await call('POST', `${MP}/ownedaccesskeys`, accessKey(name, {}));
          if (created.status !== 201) throw new Error(`create: ${created.status}`);
          const deleted = await call('DELETE', `${MP}/ownedaccesskeys/${name}`);
          if (deleted.status !== 200) throw new Error(`delete: ${deleted.status}`);
        },
      },
      {
        what: "the key's last use is recorded",
        until: async () =>
          Boolean((await ctx.admin.get(clusterPath('ownedaccesskeys', keyName)))?.status?.lastActivity),
      },
    ];
  },
};

/**
 * Unique key ids: admission claims a new key's id with a Lease, reads a claim in its way, looks
 * up the key it names (a key that exists keeps its id) and takes over a stale one (here one
 * acquired an hour ago by nobody); a scope's spaces are looked up in their project (a warning
 * when they are not its).
 */
const keyIdClaimsProbe: Probe = {
  id: 'key-id-claims',
  needs: { controllers: [] },
  steps: (ctx) => {
    const [held, stale] = [0, 1].map(() => generateAccessKey(randomBytes).id) as [string, string];
    const names = [`kc-${ctx.id}-a`, `kc-${ctx.id}-b`, `kc-${ctx.id}-c`] as const;
    const claims = `/apis/coordination.k8s.io/v1/namespaces/${ctx.setting.namespace}/leases`;
    const claim = (keyId: string, spec: Record<string, unknown>, owner?: { name: string; uid: string }) =>
      ctx.admin.create(claims, {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: {
          name: `accesskey-id-${keyId}`,
          ...(owner ? { ownerReferences: [{ apiVersion: V1, kind: 'OwnedAccessKey', ...owner }] } : {}),
        },
        spec,
      });
    const key = (name: string, keyId: string) =>
      accessKey(name, {
        keyId,
        keyHash: randomBytes(32).toString('hex'),
        scope: { spaces: [{ project: `kc-${ctx.id}`, space: `p-kc-${ctx.id}` }] },
      });
    const microTime = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');
    ctx.cleanup.push(
      ...names.map((name) => () => ctx.admin.delete(clusterPath('ownedaccesskeys', name))),
      ...[held, stale].map((keyId) => () => ctx.admin.delete(`${claims}/accesskey-id-${keyId}`)),
    );
    return [
      {
        what: 'an id claimed for a key that exists is refused to another key',
        run: async () => {
          const owner = await ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            key(names[0], generateAccessKey(randomBytes).id),
          );
          await claim(
            held,
            { holderIdentity: names[0], acquireTime: microTime(Date.now()) },
            {
              name: names[0],
              uid: owner.metadata.uid,
            },
          );
          const refused = await ctx.admin.call('POST', clusterPath('ownedaccesskeys'), {
            body: key(names[1], held),
          });
          if (refused.status !== 422) throw new Error(`a second key with the id: ${refused.status}`);
        },
      },
      {
        what: 'a stale claim (acquired an hour ago by nobody) is taken over',
        run: async () => {
          await claim(stale, { acquireTime: microTime(Date.now() - 3600_000) });
          await ctx.admin.create(clusterPath('ownedaccesskeys'), key(names[2], stale));
        },
      },
    ];
  },
};

/** The signing keys are rotated in their Secret (here: an empty key ring gets its first key). */
const gatewaySigningKeysProbe: Probe = {
  id: 'gateway-signing-keys',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    const path = corePath(ctx.setting.namespace, 'secrets', SIGNING_KEYS_SECRET);
    await ctx.admin.delete(path);
    await ctx.admin.create(corePath(ctx.setting.namespace, 'secrets'), {
      metadata: { name: SIGNING_KEYS_SECRET },
      data: { 'keys.json': b64('[]') },
    });
  },
  steps: (ctx) => [
    {
      what: 'the key ring holds a key',
      until: async () => {
        const secret = await ctx.admin.get(corePath(ctx.setting.namespace, 'secrets', SIGNING_KEYS_SECRET));
        const ring = secret?.data?.['keys.json'];
        return ring !== undefined && JSON.parse(Buffer.from(ring, 'base64').toString()).length > 0;
      },
    },
  ],
};

/**
 * The stand-in cluster manager the probes share (the configuration has one `auth.clusterManager`,
 * and the probes of a run share the configuration): started, and the configuration pointed at it,
 * by the first probe that needs it; stopped, and the configuration restored, after the last.
 */
let sharedClusterManager:
  | { users: number; api: Promise<ClusterManagerApi>; restore: () => Promise<unknown> }
  | undefined;

async function clusterManagerFor(ctx: ProbeContext): Promise<ClusterManagerApi> {
  if (!sharedClusterManager) {
    const path = corePath(ctx.setting.namespace, 'secrets', 'platform-config');
    const api = startClusterManagerApi();
    const admin = ctx.admin;
    let original: string | undefined;
    sharedClusterManager = {
      users: 0,
      api: api.then(async (clusterManager) => {
        const secret = await admin.get(path);
        original = Buffer.from(secret?.data?.config ?? '', 'base64').toString('utf8');
        const config = (parse(original) ?? {}) as Record<string, any>;
        config.auth = {
          ...config.auth,
          clusterManager: {
            host: clusterManager.host,
            bearerToken: clusterManager.adminKey(),
            insecure: true,
          },
        };
        await admin.merge(path, { data: { config: b64(stringify(config)) } });
        return clusterManager;
      }),
      restore: () => admin.merge(path, { data: { config: b64(original ?? '') } }),
    };
  }
  const shared = sharedClusterManager;
  shared.users += 1;
  ctx.cleanup.push(async () => {
    shared.users -= 1;
    if (shared.users > 0) return;
    sharedClusterManager = undefined;
    await shared.restore();
    await (await shared.api).close();
  });
  return shared.api;
}

/** A call to the gateway's login endpoints (plain HTTP here). */
async function authCall(
  ctx: ProbeContext,
  path: string,
  body: Record<string, unknown>,
  key?: string,
): Promise<{ status: number; body: any }> {
  if (!ctx.gatewayUrl) throw new Error('the gateway is not running');
  const answer = await fetch(`${ctx.gatewayUrl}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await answer.text();
  return { status: answer.status, body: text ? JSON.parse(text) : undefined };
}

/** A sign-in through the cluster manager's key form, as a browser does it; whether a key came back. */
async function clusterManagerSignIn(ctx: ProbeContext, personalKey: string): Promise<boolean> {
  const agent = new ScriptedAgent();
  await agent.request(`${ctx.gatewayUrl}/auth/clusterManager/login`);
  const page = await agent.request(`${ctx.gatewayUrl}/auth/clusterManager/callback`, {
    method: 'POST',
    form: { key: personalKey },
  });
  return page.status === 200 && page.text.includes('id="access-key"');
}

/**
 * Signing in, served by the gateway (src/login): a helpdesk RBAC allows sets a user's password
 * through the API twice (its Secret created, then replaced); the user signs in with it (a Login
 * key) and out (the key deleted); a person signs in through the cluster manager (stood in for
 * here), which makes the User and the Team of its group, and again with another group, which
 * updates both.
 */
const loginProbe: Probe = {
  id: 'login',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    const clusterManager = await clusterManagerFor(ctx);
    ctx.state.clusterManager = clusterManager;
    const user = `lu-${ctx.id}`;
    const helpdesk = `lh-${ctx.id}`;
    const sso = `ls-${ctx.id}`;
    for (const name of [user, helpdesk]) {
      await ctx.admin.create(clusterPath('users'), {
        apiVersion: V1,
        kind: 'User',
        metadata: { name },
        spec: { username: name },
      });
      ctx.cleanup.push(() => ctx.admin.delete(clusterPath('users', name)));
    }
    ctx.cleanup.push(
      () => ctx.admin.delete(clusterPath('users', sso)),
      () => ctx.admin.delete(clusterPath('teams', `lg-${ctx.id}`)),
      () => ctx.admin.delete(clusterPath('teams', `lg2-${ctx.id}`)),
      () => ctx.admin.delete(corePath(ctx.setting.namespace, 'secrets', `platform-password-${user}`)),
    );
    await ctx.admin.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: helpdesk },
      rules: [
        { apiGroups: [GROUP], resources: ['users/password'], resourceNames: [user], verbs: ['update'] },
      ],
    });
    await ctx.admin.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: helpdesk },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: helpdesk },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `platform:user:${helpdesk}` }],
    });
    ctx.cleanup.push(
      () => ctx.admin.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${helpdesk}`),
      () => ctx.admin.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${helpdesk}`),
    );
    ctx.cleanup.push(() => ctx.admin.delete(clusterPath('ownedaccesskeys', `lk-${ctx.id}`)));
    clusterManager.users.set('u-sso', {
      id: 'u-sso',
      username: sso,
      enabled: true,
      groups: [`lg-${ctx.id}`],
    });
  },
  steps: (ctx) => {
    const user = `lu-${ctx.id}`;
    const sso = `ls-${ctx.id}`;
    const clusterManager = ctx.state.clusterManager as ClusterManagerApi;
    const team = (name: string) => ctx.admin.get(clusterPath('teams', name));
    return [
      {
        what: "the helpdesk sets the user's password through the API, twice",
        // Keys are made through admission (which stores only their hash), once it serves.
        run: async () => {
          ctx.state.helpdeskKey = generateAccessKey(randomBytes).key;
          await ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            accessKey(`lk-${ctx.id}`, { user: `lh-${ctx.id}`, key: ctx.state.helpdeskKey }),
          );
        },
        until: async () => {
          const path = `/auth/users/${user}/password`;
          const first = await authCall(ctx, path, { password: 'first password 1' }, ctx.state.helpdeskKey);
          if (first.status !== 200) return false;
          return (
            (await authCall(ctx, path, { password: 'probe password 1' }, ctx.state.helpdeskKey)).status ===
            200
          );
        },
      },
      {
        what: 'the user signs in with the password (a Login key) and out (the key deleted)',
        until: async () => {
          const signedIn = await authCall(ctx, '/auth/password/login', {
            username: user,
            password: 'probe password 1',
          });
          if (signedIn.status !== 200) return false;
          const out = await authCall(ctx, '/auth/logout', {}, signedIn.body.key);
          return out.status === 200 && out.body?.loggedOut === true;
        },
      },
      {
        what: 'a person signs in through the cluster manager: the User and the Team of its group are made',
        until: async () =>
          (await clusterManagerSignIn(ctx, clusterManager.apiKey('u-sso'))) &&
          ((await team(`lg-${ctx.id}`))?.spec?.users ?? []).includes(sso),
      },
      {
        what: 'signing in again with another group updates the User and the teams',
        run: async () => {
          clusterManager.users.set('u-sso', {
            id: 'u-sso',
            username: sso,
            enabled: true,
            groups: [`lg2-${ctx.id}`],
          });
        },
        until: async () =>
          (await clusterManagerSignIn(ctx, clusterManager.apiKey('u-sso'))) &&
          JSON.stringify((await ctx.admin.get(clusterPath('users', sso)))?.spec?.groups) ===
            JSON.stringify([`lg2-${ctx.id}`]) &&
          !((await team(`lg-${ctx.id}`))?.spec?.users ?? []).includes(sso),
      },
    ];
  },
};

/**
 * Identity refresh (the identityrefresh controller): a Login key signed in through the cluster
 * manager is refreshed (its identity written, the User given its groups, the Team of its group
 * made with the user in it), and disabled once the cluster manager disables the user.
 */
const identityRefreshProbe: Probe = {
  id: 'identity-refresh',
  needs: { controllers: ['identityrefresh'] },
  before: async (ctx) => {
    const clusterManager = await clusterManagerFor(ctx);
    ctx.state.clusterManager = clusterManager;
    const user = `lr-${ctx.id}`;
    clusterManager.users.set('u-ref', { id: 'u-ref', username: user, enabled: true, groups: [] });
    await ctx.admin.create(clusterPath('users'), {
      apiVersion: V1,
      kind: 'User',
      metadata: { name: user, annotations: { 'login.management.platform/connector': 'clusterManager' } },
      spec: { username: user },
    });
    ctx.cleanup.push(
      () => ctx.admin.delete(clusterPath('ownedaccesskeys', `lrk-${ctx.id}`)),
      () => ctx.admin.delete(clusterPath('users', user)),
      () => ctx.admin.delete(clusterPath('teams', `lrg-${ctx.id}`)),
    );
  },
  steps: (ctx) => {
    const key = clusterPath('ownedaccesskeys', `lrk-${ctx.id}`);
    const user = `lr-${ctx.id}`;
    return [
      {
        what: "the identity is refreshed: the User gets its groups, the group's Team is made with the user",
        // A Login key signed in long ago (made through admission, once it serves).
        run: () =>
          ctx.admin.create(
            clusterPath('ownedaccesskeys'),
            accessKey(`lrk-${ctx.id}`, {
              user,
              type: 'Login',
              key: generateAccessKey(randomBytes).key,
              identity: {
                connector: 'clusterManager',
                userId: 'u-ref',
                username: user,
                groups: [`lrg-${ctx.id}`],
              },
              identityRefresh: '2020-01-01T00:00:00Z',
            }),
          ),
        until: async () =>
          (await ctx.admin.get(key))?.spec?.identityRefresh !== '2020-01-01T00:00:00Z' &&
          ((await ctx.admin.get(clusterPath('teams', `lrg-${ctx.id}`)))?.spec?.users ?? []).includes(user),
      },
      {
        what: 'a user the cluster manager disabled ends the key (disabled)',
        run: async () => {
          const clusterManager = ctx.state.clusterManager as ClusterManagerApi;
          const managed = clusterManager.users.get('u-ref');
          if (managed) managed.enabled = false;
          await ctx.admin.merge(key, { spec: { identityRefresh: '2020-01-01T00:00:00Z' } });
        },
        until: async () => (await ctx.admin.get(key))?.spec?.disabled === true,
      },
    ];
  },
};

/**
 * The platform as an OpenID provider keeps its short-lived state as Secrets that every gateway
 * replica sees: an authorization request writes its interaction (server-side apply), and an
 * entry that has expired is deleted (the expiry controller's watch and delete).
 */
const openIdProviderProbe: Probe = {
  id: 'openid-provider',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    const { namespace } = ctx.setting;
    const configPath = corePath(namespace, 'secrets', 'platform-config');
    const original = Buffer.from((await ctx.admin.get(configPath))?.data?.config ?? '', 'base64').toString(
      'utf8',
    );
    const config = (parse(original) ?? {}) as Record<string, any>;
    config.oidc = {
      enabled: true,
      clients: [
        {
          name: 'probe',
          clientId: `rp-${ctx.id}`,
          clientSecret: 'probe client secret',
          redirectURIs: ['https://rp.example/callback'],
        },
      ],
    };
    await ctx.admin.merge(configPath, { data: { config: b64(stringify(config)) } });
    const expired = stateSecret({
      model: 'Session',
      id: `expired-${ctx.id}`,
      namespace,
      payload: { accountId: 'nobody' },
      expiresAt: Date.now() - 1000,
    });
    await ctx.admin.create(corePath(namespace, 'secrets'), expired);
    ctx.cleanup.push(
      () => ctx.admin.merge(configPath, { data: { config: b64(original) } }),
      () => ctx.admin.delete(corePath(namespace, 'secrets', stateSecretName('Session', `expired-${ctx.id}`))),
      async () => {
        for (const secret of await ctx.admin.list(corePath(namespace, 'secrets'), OIDC_MODEL_LABEL))
          await ctx.admin.delete(corePath(namespace, 'secrets', secret.metadata.name));
      },
    );
  },
  steps: (ctx) => [
    {
      what: 'an authorization request: its interaction is kept as a Secret',
      until: async () => {
        if (!ctx.gatewayUrl) throw new Error('the gateway is not running');
        const query = new URLSearchParams({
          client_id: `rp-${ctx.id}`,
          redirect_uri: 'https://rp.example/callback',
          response_type: 'code',
          scope: 'openid',
          code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
          code_challenge_method: 'S256',
          state: ctx.id,
        });
        const answer = await fetch(`${ctx.gatewayUrl}/oidc/auth?${query}`, { redirect: 'manual' });
        await answer.body?.cancel();
        if (answer.status !== 303) return false;
        const kept = await ctx.admin.list(
          corePath(ctx.setting.namespace, 'secrets'),
          `${OIDC_MODEL_LABEL}=interaction`,
        );
        return kept.length > 0;
      },
    },
    {
      what: 'an expired entry is deleted',
      until: async () =>
        (await ctx.admin.get(
          corePath(ctx.setting.namespace, 'secrets', stateSecretName('Session', `expired-${ctx.id}`)),
        )) === null,
    },
  ],
};

/** The reason of an instance's `Provisioned` condition (undefined: none yet, or no instance). */
const provisionedReason = (vci: { status?: { conditions?: { type: string; reason?: string }[] } } | null) =>
  vci?.status?.conditions?.find((condition) => condition.type === 'Provisioned')?.reason;

/**
 * The in-cluster provisioner (the chart's default `virtualClusters.provisioner`), run by the
 * virtual cluster controller as its ServiceAccount: a VirtualClusterInstance naming a template
 * gets its StatefulSet, Service and Secrets (pki, admin) in its project namespace, the
 * StatefulSet follows a change of the template; deleted, they go, with the storage claim (written here as the StatefulSet controller would: none runs).
 * Admission lets the instance in once the webhook found its template.
 */
const inClusterProvisionerProbe: Probe = {
  id: 'in-cluster-provisioner',
  needs: { controllers: ['virtualcluster'] },
  before: async (ctx) => {
    const ns = `icp-${ctx.id}`;
    await createNamespace(ctx, ns, ctx.admin, { 'management.platform/project': ns });
    await ctx.admin.create(clusterPath('virtualclustertemplates'), {
      apiVersion: V1,
      kind: 'VirtualClusterTemplate',
      metadata: { name: `icp-${ctx.id}` },
      spec: {},
    });
    ctx.cleanup.push(() => ctx.admin.delete(clusterPath('virtualclustertemplates', `icp-${ctx.id}`)));
  },
  steps: (ctx) => {
    const ns = `icp-${ctx.id}`;
    const path = `${MP}/namespaces/${ns}/virtualclusterinstances/vc`;
    const statefulSet = `/apis/apps/v1/namespaces/${ns}/statefulsets/${statefulSetNameOf('vc')}`;
    const made = [
      statefulSet,
      corePath(ns, 'services', serviceNameOf('vc')),
      corePath(ns, 'secrets', secretNameOf('vc', 'pki')),
      corePath(ns, 'secrets', secretNameOf('vc', 'admin')),
    ];
    const claim = corePath(ns, 'persistentvolumeclaims', dataClaimNameOf('vc'));
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    for (const object of [...made, claim]) ctx.cleanup.push(() => ctx.admin.delete(object));
    return [
      {
        what: 'a provisioned instance gets its StatefulSet, Service and Secrets',
        run: () =>
          ctx.admin.create(`${MP}/namespaces/${ns}/virtualclusterinstances`, {
            apiVersion: V1,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: { templateRef: { name: `icp-${ctx.id}` } },
          }),
        until: async () => (await Promise.all(made.map((p) => ctx.admin.get(p)))).every((o) => o !== null),
      },
      {
        what: "the StatefulSet's storage claim exists (as the StatefulSet controller would make it)",
        run: async () => {
          const owner = await ctx.admin.get(statefulSet);
          await ctx.admin.create(corePath(ns, 'persistentvolumeclaims'), {
            metadata: {
              name: dataClaimNameOf('vc'),
              labels: selectorLabelsOf('vc'),
              ownerReferences: [
                {
                  apiVersion: 'apps/v1',
                  kind: 'StatefulSet',
                  name: owner.metadata.name,
                  uid: owner.metadata.uid,
                },
              ],
            },
            spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
          });
        },
      },
      {
        // Read again by each look at the (starting) instance; the next step shows the watch.
        what: "a change of the instance's template reaches its StatefulSet",
        run: () =>
          ctx.admin.merge(clusterPath('virtualclustertemplates', `icp-${ctx.id}`), {
            spec: { resources: { requests: { memory: '300Mi' } } },
          }),
        until: async () =>
          (await ctx.admin.get(statefulSet))?.spec?.template?.spec?.resources?.requests?.memory === '300Mi',
      },
      {
        what: 'its template deleted, the instance says TemplateNotFound',
        run: () => ctx.admin.delete(clusterPath('virtualclustertemplates', `icp-${ctx.id}`)),
        until: async () => provisionedReason(await ctx.admin.get(path)) === 'TemplateNotFound',
      },
      {
        // TemplateNotFound is not looked at again by time (only a template can change it): without
        // the templates' watch the instance would stay so, whatever the re-reads of a starting one.
        what: 'the template made again, the instance is made from it again',
        run: () =>
          ctx.admin.create(clusterPath('virtualclustertemplates'), {
            apiVersion: V1,
            kind: 'VirtualClusterTemplate',
            metadata: { name: `icp-${ctx.id}` },
            spec: {},
          }),
        until: async () => {
          const reason = provisionedReason(await ctx.admin.get(path));
          return reason !== undefined && reason !== 'TemplateNotFound';
        },
      },
      {
        what: 'deleted, the instance takes its control plane, claim and Secrets with it',
        run: () => ctx.admin.delete(path),
        until: async () =>
          (await ctx.admin.get(path)) === null &&
          (await Promise.all([...made, claim].map((p) => ctx.admin.get(p)))).every(
            (o) => o === null || o.metadata.deletionTimestamp !== undefined,
          ),
      },
    ];
  },
};

/**
 * Sleep mode of a provisioned (in-cluster) instance, by the virtual cluster controller: asked to
 * sleep (the sleep-requested annotation, as `platform sleep` writes it), its control plane is
 * stopped, its StatefulSet scaled to zero, and it says Sleeping; activity wakes it, its
 * StatefulSet applied again; inactive for its `spec.deleteAfter`, it is deleted by the
 * controller (and its objects go with it).
 */
const sleepModeProbe: Probe = {
  id: 'sleep-mode',
  needs: { controllers: ['virtualcluster'] },
  before: async (ctx) => {
    const ns = `sm-${ctx.id}`;
    await createNamespace(ctx, ns, ctx.admin, { 'management.platform/project': ns });
    await ctx.admin.create(clusterPath('virtualclustertemplates'), {
      apiVersion: V1,
      kind: 'VirtualClusterTemplate',
      metadata: { name: `sm-${ctx.id}` },
      spec: {},
    });
    ctx.cleanup.push(() => ctx.admin.delete(clusterPath('virtualclustertemplates', `sm-${ctx.id}`)));
  },
  steps: (ctx) => {
    const ns = `sm-${ctx.id}`;
    const path = `${MP}/namespaces/${ns}/virtualclusterinstances/vc`;
    const statefulSet = `/apis/apps/v1/namespaces/${ns}/statefulsets/${statefulSetNameOf('vc')}`;
    ctx.cleanup.push(forceDelete(ctx.admin, path));
    for (const object of [
      statefulSet,
      corePath(ns, 'services', serviceNameOf('vc')),
      corePath(ns, 'secrets', secretNameOf('vc', 'pki')),
      corePath(ns, 'secrets', secretNameOf('vc', 'admin')),
    ])
      ctx.cleanup.push(() => ctx.admin.delete(object));
    return [
      {
        what: 'a provisioned instance gets its StatefulSet, not scaled to zero',
        run: () =>
          ctx.admin.create(`${MP}/namespaces/${ns}/virtualclusterinstances`, {
            apiVersion: V1,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: { templateRef: { name: `sm-${ctx.id}` } },
          }),
        until: async () => ((await ctx.admin.get(statefulSet))?.spec?.replicas ?? 0) > 0,
      },
      {
        what: 'asked to sleep, it sleeps: Sleeping=True, its StatefulSet scaled to zero',
        run: () =>
          ctx.admin.merge(path, {
            metadata: { annotations: { [SLEEP_REQUESTED_ANNOTATION]: new Date().toISOString() } },
          }),
        until: async () =>
          (await ctx.admin.get(statefulSet))?.spec?.replicas === 0 &&
          conditionOf(await ctx.admin.get(path), 'Sleeping')?.status === 'True',
      },
      {
        what: 'activity (the last-activity annotation, as the gateway and platform wake write it) wakes it: its StatefulSet back, Sleeping=False',
        run: () =>
          ctx.admin.merge(path, {
            metadata: { annotations: { [LAST_ACTIVITY_ANNOTATION]: new Date().toISOString() } },
          }),
        until: async () =>
          ((await ctx.admin.get(statefulSet))?.spec?.replicas ?? 0) > 0 &&
          conditionOf(await ctx.admin.get(path), 'Sleeping')?.status === 'False',
      },
      {
        what: 'inactive for its deleteAfter, the controller deletes it',
        run: () => ctx.admin.merge(path, { spec: { deleteAfter: 1 } }),
        until: async () => (await ctx.admin.get(path)) === null,
      },
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
  virtualClusterSharesProbe,
  webhookCertificatesProbe,
  webhookConfigurationsProbe,
  gatewayProbe,
  gatewaySigningKeysProbe,
  keyIdClaimsProbe,
  loginProbe,
  identityRefreshProbe,
  openIdProviderProbe,
  accessProxyProbe,
  proxyWakeProbe,
  inClusterProvisionerProbe,
  sleepModeProbe,
];

/** `<owner>:<group>/<resource>:<verb>` for each verb. */
const each = (owner: string, resource: string, verbs: string[], probe: string) =>
  Object.fromEntries(verbs.map((verb) => [`${owner}:${resource}:${verb}`, probe]));

/**
 * Which probe shows that a rule entry (`<owner>:group/resource:verb[name]`, the owner a component
 * or `syncer` for the syncer roles) is needed: removing the entry must make that probe fail on a
 * request of that owner that the apiserver denied. Where a permission serves several features,
 * the probe named is the one that exercises it most directly.
 */
export const PROBE_OF_ENTRY: Record<string, string> = {
  // The controller.
  'controller:management.platform/sharedsecrets:*': 'sharedsecret',
  'controller:management.platform/sharedsecrets/status:*': 'sharedsecret',
  'controller:management.platform/sharedsecrets/finalizers:update': 'sharedsecret',
  'controller:management.platform/projects/finalizers:update': 'projects',
  ...each('controller', 'management.platform/ownedaccesskeys', ['list', 'watch', 'delete'], 'access-keys'),
  'controller:management.platform/ownedaccesskeys/status:patch': 'access-keys',
  ...each('controller', 'management.platform/users', ['list', 'watch'], 'team-membership'),
  ...each('controller', 'management.platform/teams', ['list', 'watch'], 'team-membership'),
  'controller:management.platform/users/status:patch': 'team-membership',
  'controller:management.platform/teams/status:patch': 'team-membership',
  ...each('controller', 'management.platform/ownedaccesskeys', ['get', 'patch'], 'identity-refresh'),
  ...each('controller', 'management.platform/users', ['get', 'patch'], 'identity-refresh'),
  ...each('controller', 'management.platform/teams', ['get', 'create', 'update'], 'identity-refresh'),
  ...each('controller', 'management.platform/projects', ['list', 'watch', 'patch'], 'projects'),
  'controller:management.platform/projects/status:patch': 'projects',
  ...each(
    'controller',
    'management.platform/virtualclusterinstances',
    ['list', 'watch', 'patch'],
    'virtual-cluster',
  ),
  'controller:management.platform/virtualclusterinstances/status:patch': 'virtual-cluster',
  ...each('controller', 'management.platform/clusters', ['list', 'watch'], 'cluster'),
  'controller:management.platform/clusters/status:patch': 'cluster',
  ...each(
    'controller',
    'rbac.authorization.k8s.io/roles',
    ['list', 'watch', 'create', 'patch', 'delete'],
    'sharedsecret',
  ),
  ...each(
    'controller',
    'rbac.authorization.k8s.io/rolebindings',
    ['list', 'watch', 'create', 'patch', 'delete'],
    'sharedsecret',
  ),
  ...Object.fromEntries(
    ['platform-project-admin', 'platform-project-user', 'platform-project-viewer'].map((role) => [
      `controller:rbac.authorization.k8s.io/clusterroles:bind[${role}]`,
      'projects',
    ]),
  ),
  // (Not the Secret syncer role's: with the chart's default in-cluster provisioner the controller
  // holds all of that role's permissions, so binds it without `bind`, and the chart grants none.)
  ...Object.fromEntries(
    ['services', 'endpoints', 'configmaps'].map((plural) => [
      `controller:rbac.authorization.k8s.io/clusterroles:bind[platform-vcluster-syncer-${plural}]`,
      'virtual-cluster',
    ]),
  ),
  ...each(
    'controller',
    'core/serviceaccounts',
    ['list', 'watch', 'create', 'patch', 'delete'],
    'virtual-cluster',
  ),
  'controller:core/serviceaccounts/token:create': 'virtual-cluster',
  'controller:core/namespaces:get': 'project-conflict',
  // The in-cluster provisioner (the chart's default virtualClusters.provisioner).
  ...each(
    'controller',
    'management.platform/virtualclustertemplates',
    ['get', 'list', 'watch'],
    'in-cluster-provisioner',
  ),
  'controller:management.platform/virtualclusterinstances:get': 'in-cluster-provisioner',
  'controller:management.platform/virtualclusterinstances/finalizers:update': 'in-cluster-provisioner',
  'controller:apps/statefulsets/scale:patch': 'sleep-mode',
  'controller:management.platform/virtualclusterinstances:delete': 'sleep-mode',
  ...each('controller', 'apps/statefulsets', ['get', 'create', 'patch', 'delete'], 'in-cluster-provisioner'),
  ...each('controller', 'core/services', ['get', 'create', 'patch', 'delete'], 'in-cluster-provisioner'),
  ...each('controller', 'core/secrets', ['create', 'delete'], 'in-cluster-provisioner'),
  ...each('controller', 'core/persistentvolumeclaims', ['get', 'delete'], 'in-cluster-provisioner'),
  ...each('controller', 'core/namespaces', ['list', 'watch', 'create', 'patch', 'delete'], 'projects'),
  ...each('controller', 'core/resourcequotas', ['list', 'watch', 'create', 'patch', 'delete'], 'projects'),
  'controller:core/secrets:get': 'virtual-cluster',
  ...each('controller', 'core/secrets', ['list', 'watch', 'patch'], 'secret-sync'),
  ...each('controller', 'events.k8s.io/events', ['create', 'patch'], 'events'),
  'controller:coordination.k8s.io/leases:create': 'leader-election',
  'controller:coordination.k8s.io/leases:get': 'leader-election',
  'controller:coordination.k8s.io/leases:update': 'leader-election',
  'controller:coordination.k8s.io/leases:list': 'virtual-cluster-shares',
  'controller:coordination.k8s.io/leases:watch': 'virtual-cluster-shares',
  'controller:coordination.k8s.io/leases:delete': 'virtual-cluster-shares',
  // The webhook.
  'webhook:authorization.k8s.io/subjectaccessreviews:create': 'secret-sync',
  'webhook:management.platform/users:get': 'admission-identities',
  'webhook:management.platform/projects:get': 'key-id-claims',
  'webhook:management.platform/ownedaccesskeys:list': 'access-keys',
  'webhook:management.platform/ownedaccesskeys:get': 'key-id-claims',
  'webhook:coordination.k8s.io/leases:create': 'access-keys',
  'webhook:coordination.k8s.io/leases:get': 'key-id-claims',
  'webhook:coordination.k8s.io/leases:delete': 'key-id-claims',
  'webhook:management.platform/teams:get': 'admission-identities',
  'webhook:core/namespaces:get': 'virtual-cluster',
  'webhook:management.platform/virtualclustertemplates:get': 'in-cluster-provisioner',
  'webhook:admissionregistration.k8s.io/validatingwebhookconfigurations:create[platform-validating-webhooks]':
    'webhook-configurations',
  'webhook:admissionregistration.k8s.io/validatingwebhookconfigurations:patch[platform-validating-webhooks]':
    'webhook-configurations',
  'webhook:admissionregistration.k8s.io/mutatingwebhookconfigurations:create[platform-mutating-webhooks]':
    'webhook-configurations',
  'webhook:admissionregistration.k8s.io/mutatingwebhookconfigurations:patch[platform-mutating-webhooks]':
    'webhook-configurations',
  'webhook:core/secrets:create': 'access-keys',
  'webhook:core/secrets:get[platform-config]': 'access-keys',
  'webhook:core/secrets:get[platform-access-key-pepper]': 'access-keys',
  'webhook:core/secrets:get[platform-webhook-serving]': 'webhook-certificates',
  'webhook:core/secrets:update[platform-webhook-serving]': 'webhook-certificates',
  'webhook:core/secrets:list[platform-webhook-serving]': 'webhook-certificates',
  'webhook:core/secrets:watch[platform-webhook-serving]': 'webhook-certificates',
  // The gateway.
  ...each('gateway', 'core/users', ['impersonate'], 'gateway'),
  ...each('gateway', 'core/groups', ['impersonate'], 'gateway'),
  'gateway:authentication.k8s.io/userextras/management.platform/access-key:impersonate': 'gateway',
  'gateway:authorization.k8s.io/subjectaccessreviews:create': 'gateway',
  ...each(
    'gateway',
    'management.platform/ownedaccesskeys',
    ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
    'gateway',
  ),
  'gateway:management.platform/ownedaccesskeys/status:patch': 'gateway',
  ...each('gateway', 'management.platform/users', ['list', 'watch'], 'gateway'),
  ...each('gateway', 'management.platform/teams', ['list', 'watch'], 'gateway'),
  ...each('gateway', 'management.platform/projects', ['list', 'watch'], 'gateway'),
  'gateway:management.platform/virtualclusterinstances:get': 'gateway',
  ...each('gateway', 'management.platform/clusters', ['list', 'watch'], 'access-proxy'),
  ...each('gateway', 'management.platform/virtualclusterinstances', ['list', 'watch'], 'access-proxy'),
  'gateway:management.platform/virtualclusterinstances:patch': 'access-proxy-wake',
  'gateway:core/secrets:get': 'gateway',
  ...each('gateway', 'core/secrets', ['list', 'watch'], 'gateway'),
  ...each('gateway', 'core/secrets', ['patch', 'delete'], 'openid-provider'),
  'gateway:core/secrets:create': 'gateway',
  'gateway:core/secrets:update': 'login',
  ...each('gateway', 'management.platform/users', ['get', 'create', 'patch'], 'login'),
  ...each('gateway', 'management.platform/teams', ['get', 'create', 'update'], 'login'),
  // The syncers (their ClusterRoles, bound in their host namespaces).
  ...Object.fromEntries(
    ['services', 'endpoints', 'secrets', 'configmaps'].flatMap((plural) =>
      ['get', 'list', 'watch', 'create', 'patch', 'delete'].map((verb) => [
        `syncer:core/${plural}:${verb}`,
        'virtual-cluster',
      ]),
    ),
  ),
};
