import { randomBytes } from 'node:crypto';
import { SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { statefulSetNameOf } from '../../src/provision/in-cluster-render.ts';
import type { Probe, ProbeContext } from './probes.ts';

/**
 * The access proxy's probe of the chart's RBAC (`rbac.test.ts`): the gateway reaches a connected
 * Cluster and a project's VirtualClusterInstance (both the test's second apiserver, reached with
 * its admin token from a credentials Secret) from its caches of them. Both objects are made once
 * the gateway's caches have synced, so only its watches can bring them (list and watch are
 * each needed); the Secrets are read with its `get` on secrets.
 */

const GROUP_VERSION = 'management.platform/v1';
const MP = `/apis/${GROUP_VERSION}`;
const b64 = (text: string) => Buffer.from(text).toString('base64');

/** A GET through the access proxy with an access key: the status. */
async function proxyGet(ctx: ProbeContext, path: string, key: string): Promise<number> {
  if (!ctx.gatewayUrl) throw new Error('the gateway is not running');
  const answer = await fetch(`${ctx.gatewayUrl}${path}`, {
    headers: { authorization: `Bearer ${key}`, accept: 'application/json' },
  });
  await answer.arrayBuffer();
  return answer.status;
}

const names = (ctx: ProbeContext) => {
  const project = `ap-${ctx.id}`;
  return {
    project,
    projectNamespace: `${ctx.setting.projectPrefix}${project}`,
    /** Where the Cluster's credentials Secret is: a namespace the admin chose, not a project's. */
    credentialsNamespace: `apc-${ctx.id}`,
    cluster: `ap-${ctx.id}`,
    key: `ap-${ctx.id}`,
  };
};

export const accessProxyProbe: Probe = {
  id: 'access-proxy',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    const { project, projectNamespace, credentialsNamespace } = names(ctx);
    const credentials = { token: b64(ctx.setting.virtual.token) };
    await ctx.admin.create(`${MP}/projects`, {
      apiVersion: GROUP_VERSION,
      kind: 'Project',
      metadata: { name: project },
      spec: { owner: { user: ctx.setting.users.alice } },
    });
    ctx.cleanup.push(async () => {
      await ctx.admin.merge(`${MP}/projects/${project}`, { metadata: { finalizers: null } }).catch(() => {});
      await ctx.admin.delete(`${MP}/projects/${project}`);
    });
    for (const namespace of [projectNamespace, credentialsNamespace]) {
      await ctx.admin.create('/api/v1/namespaces', { metadata: { name: namespace } });
      ctx.cleanup.push(() => ctx.admin.delete(`/api/v1/namespaces/${namespace}`));
      await ctx.admin.create(`/api/v1/namespaces/${namespace}/secrets`, {
        metadata: { name: 'target-credentials' },
        data: credentials,
      });
    }
  },
  steps: (ctx) => {
    const { project, projectNamespace, credentialsNamespace, cluster, key } = names(ctx);
    const generated = generateAccessKey(randomBytes);
    const target = ctx.setting.virtual;
    ctx.cleanup.push(
      () => ctx.admin.delete(`${MP}/ownedaccesskeys/${key}`),
      () => ctx.admin.delete(`${MP}/clusters/${cluster}`),
    );
    return [
      {
        what: "alice's key is accepted by the gateway",
        run: () =>
          ctx.admin.create(`${MP}/ownedaccesskeys`, {
            apiVersion: GROUP_VERSION,
            kind: 'OwnedAccessKey',
            metadata: { name: key },
            spec: { user: 'alice', type: 'User', key: generated.key },
          }),
        until: async () => (await proxyGet(ctx, '/kubernetes/management/apis', generated.key)) === 200,
      },
      {
        what: 'alice reaches a connected Cluster made after the caches synced, through the access proxy',
        run: () =>
          ctx.admin.create(`${MP}/clusters`, {
            apiVersion: GROUP_VERSION,
            kind: 'Cluster',
            metadata: { name: cluster },
            spec: {
              endpoint: target.server,
              caData: b64(target.caPem),
              credentialsSecretRef: { namespace: credentialsNamespace, name: 'target-credentials' },
            },
          }),
        until: async () =>
          (await proxyGet(ctx, `/kubernetes/cluster/${cluster}/version`, generated.key)) === 200,
      },
      {
        what: "alice reaches her project's virtual cluster, made after the caches synced, through the access proxy",
        run: () =>
          ctx.admin.create(`${MP}/namespaces/${projectNamespace}/virtualclusterinstances`, {
            apiVersion: GROUP_VERSION,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: {
              endpoint: target.server,
              caData: b64(target.caPem),
              credentialsSecretRef: { name: 'target-credentials' },
            },
          }),
        until: async () =>
          (await proxyGet(ctx, `/kubernetes/project/${project}/virtualcluster/vc/version`, generated.key)) ===
          200,
      },
    ];
  },
};

/**
 * Sleep mode at the access proxy, with the virtual cluster controller that sleeps and wakes: a
 * provisioned (in-cluster) instance of alice's project put to sleep (the sleep-requested
 * annotation, as `platform sleep` writes it), a request of hers through the proxy asks it to
 * wake (the gateway writes its last-activity annotation: its `patch` on virtualclusterinstances),
 * and the controller wakes it (its StatefulSet scaled up again). Nothing runs the control plane
 * here (no kubelet): the request waits its 1 s and is answered 503, its wake request written.
 */
export const proxyWakeProbe: Probe = {
  id: 'access-proxy-wake',
  needs: { controllers: ['virtualcluster'], gateway: true },
  before: async (ctx) => {
    const { project, projectNamespace } = wakeNames(ctx);
    await ctx.admin.create(`${MP}/projects`, {
      apiVersion: GROUP_VERSION,
      kind: 'Project',
      metadata: { name: project },
      spec: { owner: { user: ctx.setting.users.alice } },
    });
    ctx.cleanup.push(async () => {
      await ctx.admin.merge(`${MP}/projects/${project}`, { metadata: { finalizers: null } }).catch(() => {});
      await ctx.admin.delete(`${MP}/projects/${project}`);
    });
    // Labelled as its project's, as the project controller makes it (the controller provisions
    // only in project namespaces: templates/confinement.yaml).
    await ctx.admin.create('/api/v1/namespaces', {
      metadata: { name: projectNamespace, labels: { 'management.platform/project': project } },
    });
    ctx.cleanup.push(() => ctx.admin.delete(`/api/v1/namespaces/${projectNamespace}`));
    // Only a caller who may get the instance wakes it (as her project role lets her).
    const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${projectNamespace}`;
    await ctx.admin.create(`${rbac}/roles`, {
      metadata: { name: 'alice' },
      rules: [{ apiGroups: ['management.platform'], resources: ['virtualclusterinstances'], verbs: ['get'] }],
    });
    await ctx.admin.create(`${rbac}/rolebindings`, {
      metadata: { name: 'alice' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'alice' },
      subjects: [
        {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'Group',
          name: `platform:user:${ctx.setting.users.alice}`,
        },
      ],
    });
    await ctx.admin.create(`${MP}/virtualclustertemplates`, {
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterTemplate',
      metadata: { name: project },
      spec: {},
    });
    ctx.cleanup.push(() => ctx.admin.delete(`${MP}/virtualclustertemplates/${project}`));
  },
  steps: (ctx) => {
    const { project, projectNamespace } = wakeNames(ctx);
    const generated = generateAccessKey(randomBytes);
    const instance = `${MP}/namespaces/${projectNamespace}/virtualclusterinstances/vc`;
    const statefulSet = `/apis/apps/v1/namespaces/${projectNamespace}/statefulsets/${statefulSetNameOf('vc')}`;
    const replicas = async () => (await ctx.admin.get(statefulSet))?.spec?.replicas;
    const sleeping = async () =>
      ((await ctx.admin.get(instance))?.status?.conditions ?? []).find(
        (c: { type: string }) => c.type === 'Sleeping',
      )?.status;
    ctx.cleanup.push(
      () => ctx.admin.delete(`${MP}/ownedaccesskeys/${project}`),
      async () => {
        await ctx.admin.merge(instance, { metadata: { finalizers: null } }).catch(() => {});
        await ctx.admin.delete(instance);
      },
    );
    return [
      {
        what: "alice's key is accepted by the gateway",
        run: () =>
          ctx.admin.create(`${MP}/ownedaccesskeys`, {
            apiVersion: GROUP_VERSION,
            kind: 'OwnedAccessKey',
            metadata: { name: project },
            spec: { user: 'alice', type: 'User', key: generated.key },
          }),
        until: async () => (await proxyGet(ctx, '/kubernetes/management/apis', generated.key)) === 200,
      },
      {
        what: 'her provisioned virtual cluster is put to sleep (its StatefulSet at zero replicas)',
        run: async () => {
          await ctx.admin.create(`${MP}/namespaces/${projectNamespace}/virtualclusterinstances`, {
            apiVersion: GROUP_VERSION,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'vc' },
            spec: { templateRef: { name: project } },
          });
        },
        until: async () => {
          // Once it is provisioned, asked to sleep (later than its creation: its last activity).
          if ((await replicas()) === undefined) return false;
          const current = await ctx.admin.get(instance);
          if (!current.metadata.annotations?.[SLEEP_REQUESTED_ANNOTATION])
            await ctx.admin.merge(instance, {
              metadata: { annotations: { [SLEEP_REQUESTED_ANNOTATION]: new Date().toISOString() } },
            });
          return (await replicas()) === 0 && (await sleeping()) === 'True';
        },
      },
      {
        what: 'a request of hers through the access proxy wakes it (the gateway writes its last activity)',
        until: async () => {
          await proxyGet(
            ctx,
            `/kubernetes/project/${project}/virtualcluster/vc/version?timeout=1s`,
            generated.key,
          );
          return ((await replicas()) ?? 0) > 0 && (await sleeping()) === 'False';
        },
      },
    ];
  },
};

const wakeNames = (ctx: ProbeContext) => {
  const project = `apw-${ctx.id}`;
  return { project, projectNamespace: `${ctx.setting.projectPrefix}${project}` };
};
