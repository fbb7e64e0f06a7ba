import { randomBytes } from 'node:crypto';
import { LAST_ACTIVITY_ANNOTATION } from '../../src/api/labels.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import type { Probe, ProbeContext } from './probes.ts';

/**
 * The access proxy's probe of the chart's RBAC (`rbac.test.ts`): the gateway reaches a connected
 * Cluster and a project's VirtualClusterInstance (both the test's second apiserver, reached with
 * its admin token from a credentials Secret) from its caches of them. Both objects are made once
 * the gateway's caches have synced, so only its watches can bring them (list and watch are
 * each needed); the Secrets are read with its `get` on secrets. Sleep mode: a request to a
 * provisioned virtual cluster while it sleeps asks it to wake, the gateway writing its
 * last-activity annotation (its `patch` on virtualclusterinstances).
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
    template: `ap-${ctx.id}`,
  };
};

/** The status of an instance asleep since `since` (a merge patch of its status). */
const asleepStatus = (since: string) => ({
  status: {
    sleepingSince: since,
    conditions: [
      {
        type: 'Sleeping',
        status: 'True',
        reason: 'SleepRequested',
        message: 'asleep',
        lastTransitionTime: since,
      },
      { type: 'Ready', status: 'False', reason: 'Sleeping', message: 'asleep', lastTransitionTime: since },
    ],
  },
});

export const accessProxyProbe: Probe = {
  id: 'access-proxy',
  needs: { controllers: [], gateway: true },
  before: async (ctx) => {
    const { project, projectNamespace, credentialsNamespace, template } = names(ctx);
    await ctx.admin.create(`${MP}/virtualclustertemplates`, {
      apiVersion: GROUP_VERSION,
      kind: 'VirtualClusterTemplate',
      metadata: { name: template },
      spec: {},
    });
    ctx.cleanup.push(() => ctx.admin.delete(`${MP}/virtualclustertemplates/${template}`));
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
    const { project, projectNamespace, credentialsNamespace, cluster, key, template } = names(ctx);
    const generated = generateAccessKey(randomBytes);
    const target = ctx.setting.virtual;
    const instancePath = `${MP}/namespaces/${projectNamespace}/virtualclusterinstances/sleepy`;
    // The controller of a run with every feature provisions it and puts its finalizer on it.
    ctx.cleanup.push(async () => {
      await ctx.admin.merge(instancePath, { metadata: { finalizers: null } }).catch(() => {});
      await ctx.admin.delete(instancePath);
    });
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
      {
        // Only a provisioned instance (a template, no endpoint) sleeps. Its status says it
        // sleeps, as the controller writes it for an asleep one (the gateway decides from that
        // status alone); written again while it does not say so, since a running controller
        // writes this instance's conditions too. Nothing wakes it here: the request waits its
        // 1 s and is answered 503, its wake request written.
        what: 'a request to her provisioned virtual cluster while it sleeps asks it to wake (the gateway writes its last activity)',
        run: () =>
          ctx.admin.create(`${MP}/namespaces/${projectNamespace}/virtualclusterinstances`, {
            apiVersion: GROUP_VERSION,
            kind: 'VirtualClusterInstance',
            metadata: { name: 'sleepy' },
            spec: { templateRef: { name: template } },
          }),
        until: async () => {
          const instance = await ctx.admin.get(instancePath);
          const sleeping = (instance?.status?.conditions ?? []).some(
            (c: { type: string; status: string }) => c.type === 'Sleeping' && c.status === 'True',
          );
          // One time it fell asleep, however often the status is written again.
          ctx.state.sleepingSince ??= new Date().toISOString();
          if (!sleeping)
            await ctx.admin.merge(`${instancePath}/status`, asleepStatus(ctx.state.sleepingSince));
          await proxyGet(
            ctx,
            `/kubernetes/project/${project}/virtualcluster/sleepy/version?timeout=1s`,
            generated.key,
          );
          const stamp = (await ctx.admin.get(instancePath))?.metadata.annotations?.[LAST_ACTIVITY_ANNOTATION];
          return stamp !== undefined && Date.parse(stamp) > Date.parse(ctx.state.sleepingSince);
        },
      },
    ];
  },
};
