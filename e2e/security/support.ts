// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { stringify } from 'yaml';
import { CONTROLLER_NAMES } from '../../src/controllers/index.ts';
import { syncerServiceAccountName } from '../../src/controllers/virtualcluster/identity.ts';
import { type Cluster, freePort } from '../../src/dev/controlplane.ts';
import { Http } from '../chart/rbac-support.ts';
import {
  type Component,
  componentCredentials,
  installChartObjects,
  type RunningComponents,
  startComponents,
} from '../chart/support.ts';
import { apiserverWritesWhere } from '../support/apiserver-writes.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { helmBinary } from '../support/helm.ts';
import { eventually } from '../support/wait.ts';

/**
 * A platform installed as the chart installs it, on an apiserver of its own, with the
 * components running as their own ServiceAccounts (as in their pods), and two projects:
 *
 * - `team` (namespace `p-team`), where **mallory** is a member with the project's `edit` role
 *   (`platform-project-user`). She owns a virtual cluster (a second apiserver, of which she is
 *   the admin) synced into `p-team` by a VirtualClusterInstance she created;
 * - `finance` (namespace `p-finance`), whose SharedSecret `prod-db` holds a password mallory must
 *   never see.
 *
 * Mallory acts on the host exactly as such a member does: her requests carry her user and the
 * platform groups (as the gateway sends them), so Kubernetes RBAC decides. Every component logs
 * into memory and the apiserver writes an audit log (request bodies of everyone, except the
 * admin's writes of SharedSecrets, which hold the secret): `leaksOf` searches them, the host's
 * and the virtual cluster's objects, Events and conditions for the secret.
 */

export const PREFIX = 'p-';
export const TEAM = `${PREFIX}team`;
export const FINANCE = `${PREFIX}finance`;
export const MALLORY = 'mallory';
export const V1 = 'management.platform/v1';
export const MP = `/apis/${V1}`;
export const b64 = (text: string) => Buffer.from(text).toString('base64');

export interface TenantPlatform {
  host: Cluster;
  virtualCluster: Cluster;
  /** Cluster admin of the host. */
  admin: Http;
  /** Mallory on the host: a project member with `edit` in `p-team`. */
  mallory: Http;
  /** Mallory as the admin of her own virtual cluster. */
  virtual: Http;
  /** The owner of project team (`platform-project-admin` there). */
  lead: Http;
  /** The gateway's URL, when it runs (`useTenantPlatform({ gateway: true })`). */
  gatewayUrl: string | undefined;
  /** Each component's ServiceAccount. */
  components: Record<Component, Http>;
  /** The finance password, and the SharedSecret holding it. */
  secret: { value: string; namespace: string; name: string };
  /** Mallory's instance (`p-team/dev`) and its syncer's ServiceAccount. */
  instance: { name: string; serviceAccount: string };
  /** Everything the components logged so far. */
  logs(): string;
  auditLogPath: string;
  /** Successful writes the host apiserver served so far to these resources. */
  writesTo(resources: readonly string[]): Promise<number>;
}

export function useTenantPlatform(options: { gateway?: boolean } = {}): () => TenantPlatform {
  const startCluster = useExtraClusters();
  let env: TenantPlatform | undefined;
  let components: RunningComponents | undefined;
  let workDir: string | undefined;
  const logLines: string[] = [];

  beforeAll(async () => {
    await helmBinary();
    workDir = mkdtempSync(join(tmpdir(), 'platform-security-'));
    const auditLogPath = join(workDir, 'audit.log');
    const policy = join(workDir, 'audit-policy.yaml');
    writeFileSync(
      policy,
      stringify({
        apiVersion: 'audit.k8s.io/v1',
        kind: 'Policy',
        omitStages: ['RequestReceived'],
        rules: [
          // Only the setup writes the secret itself.
          {
            level: 'None',
            users: ['admin'],
            verbs: ['create', 'update', 'patch'],
            resources: [{ group: 'management.platform', resources: ['sharedsecrets'] }],
          },
          { level: 'None', resources: [{ group: 'coordination.k8s.io', resources: ['leases'] }] },
          { level: 'Request' },
        ],
      }),
    );
    const host = await startCluster({
      name: uniqueName('sec'),
      controllerManager: true,
      extraApiServerArgs: [
        `--audit-policy-file=${policy}`,
        `--audit-log-path=${auditLogPath}`,
        '--audit-log-mode=blocking',
      ],
    });
    const virtualCluster = await startCluster({ name: uniqueName('sec-vc') });
    const admin = new Http(host.server, host.caPem, host.adminToken);
    const webhookPort = await freePort();
    const install = await installChartObjects(host, {
      webhookPort,
      values: { config: { values: { projectNamespacePrefix: PREFIX } } },
    });
    for (const name of [MALLORY, 'fin', 'lead'])
      await admin.create(`${MP}/users`, { apiVersion: V1, kind: 'User', metadata: { name }, spec: {} });
    await install.registerWebhooks();
    const credentials = await componentCredentials(admin, host, workDir);
    components = await startComponents({
      kubeconfigs: credentials.kubeconfigs,
      webhookPort,
      controllers: CONTROLLER_NAMES,
      gateway: options.gateway ?? false,
      logger: pino(
        { level: 'debug' },
        {
          write: (line: string) => {
            logLines.push(line);
          },
        },
      ),
    });
    await eventually(
      async () =>
        (
          await admin.call('POST', `${MP}/namespaces/default/sharedsecrets?dryRun=All`, {
            body: {
              apiVersion: V1,
              kind: 'SharedSecret',
              metadata: { name: 'x' },
              spec: { access: [{ verbs: ['x'] }] },
            },
          })
        ).status === 422,
      60_000,
      'the admission webhooks to serve',
    );

    for (const [project, owner, members] of [
      ['team', 'lead', [{ kind: 'User', name: MALLORY, clusterRole: 'platform-project-user' }]],
      ['finance', 'fin', []],
    ] as const) {
      await admin.create(`${MP}/projects`, {
        apiVersion: V1,
        kind: 'Project',
        metadata: { name: project },
        spec: { owner: { user: owner }, members },
      });
    }
    const member = (user: string) =>
      new Http(host.server, host.caPem, host.adminToken, {
        'Impersonate-User': user,
        'Impersonate-Group': [`platform:user:${user}`, 'platform:authenticated'],
      });
    const mallory = member(MALLORY);
    // Mallory's project role is in force (the project controller bound it, RBAC took it up).
    await eventually(
      async () => (await mallory.call('GET', `/api/v1/namespaces/${TEAM}/secrets`)).status === 200,
      60_000,
      'mallory to have edit in her project',
    );
    const value = `finance-db-password-${randomBytes(12).toString('hex')}`;
    await eventually(
      async () => (await admin.get(`/api/v1/namespaces/${FINANCE}`)) !== null,
      60_000,
      'the finance namespace',
    );
    await admin.create(`${MP}/namespaces/${FINANCE}/sharedsecrets`, {
      apiVersion: V1,
      kind: 'SharedSecret',
      metadata: { name: 'prod-db' },
      spec: { data: { password: b64(value) }, access: [{ name: 'owners', verbs: ['get'], users: ['fin'] }] },
    });

    // Mallory's virtual cluster, synced into her namespace, Secrets included.
    const virtual = new Http(virtualCluster.server, virtualCluster.caPem, virtualCluster.adminToken);
    await virtual.create('/api/v1/namespaces', { metadata: { name: 'apps' } });
    await mallory.create(`/api/v1/namespaces/${TEAM}/secrets`, {
      metadata: { name: 'vc-creds' },
      data: { token: b64(virtualCluster.adminToken) },
    });
    await mallory.create(`${MP}/namespaces/${TEAM}/virtualclusterinstances`, {
      apiVersion: V1,
      kind: 'VirtualClusterInstance',
      metadata: { name: 'dev' },
      spec: {
        endpoint: virtualCluster.server,
        caData: b64(virtualCluster.caPem),
        credentialsSecretRef: { name: 'vc-creds' },
        config: stringify({
          sync: { toHost: { secrets: { enabled: true }, configMaps: { enabled: true } } },
        }),
      },
    });
    await eventually(
      async () =>
        conditionOf(await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`), 'Syncing')
          ?.status === 'True',
      90_000,
      "mallory's virtual cluster to sync",
    );

    env = {
      host,
      virtualCluster,
      admin,
      mallory,
      virtual,
      lead: member('lead'),
      gatewayUrl: components.gatewayUrl,
      components: credentials.clients,
      secret: { value, namespace: FINANCE, name: 'prod-db' },
      instance: {
        name: 'dev',
        serviceAccount: syncerServiceAccountName({ metadata: { namespace: TEAM, name: 'dev' } }),
      },
      logs: () => logLines.join(''),
      auditLogPath,
      writesTo: (resources) => apiserverWritesWhere(host, (resource) => resources.includes(resource)),
    };
  }, 600_000);

  afterAll(async () => {
    await components?.stop();
    if (env)
      for (const client of [env.admin, env.mallory, env.virtual, ...Object.values(env.components)])
        client.close();
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  return () => {
    if (!env) throw new Error('the tenant platform did not start');
    return env;
  };
}

export const conditionOf = (object: any, type: string) =>
  (object?.status?.conditions ?? []).find((c: any) => c.type === type);

/** A client acting as `user` (a ServiceAccount token, for example). */
export function clientWithToken(cluster: Cluster, token: string): Http {
  return new Http(cluster.server, cluster.caPem, token);
}

/**
 * A token of mallory's syncer's ServiceAccount, minted by mallory herself (the project's `edit`
 * role may: `create serviceaccounts/token` in her namespace): whatever the syncer may do, she
 * may do through it.
 */
export async function syncerTokenAsMallory(env: TenantPlatform): Promise<Http> {
  const answer = await env.mallory.create(
    `/api/v1/namespaces/${TEAM}/serviceaccounts/${env.instance.serviceAccount}/token`,
    { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
  );
  return clientWithToken(env.host, answer.status.token);
}

/**
 * Where a secret value shows up: host objects of every namespace (Secrets, ConfigMaps,
 * Services, Endpoints, Events of both APIs, ServiceAccounts), every VirtualClusterInstance (its
 * conditions), the virtual cluster's objects and Events, the components' logs and the host's
 * audit log; the value as it is and base64-encoded. `except` leaves out the objects that hold it
 * by design (the finance SharedSecret itself is not among the kinds searched).
 */
export async function leaksOf(env: TenantPlatform, value: string): Promise<string[]> {
  const needles = [value, b64(value)];
  const found: string[] = [];
  const search = (where: string, text: string) => {
    if (needles.some((needle) => text.includes(needle))) found.push(where);
  };
  const kinds: Array<[string, string]> = [
    ['/api/v1/secrets', 'Secret'],
    ['/api/v1/configmaps', 'ConfigMap'],
    ['/api/v1/services', 'Service'],
    ['/api/v1/endpoints', 'Endpoints'],
    ['/api/v1/events', 'Event'],
    ['/api/v1/serviceaccounts', 'ServiceAccount'],
    ['/apis/events.k8s.io/v1/events', 'Event'],
  ];
  for (const [side, client] of [
    ['host', env.admin],
    ['virtual', env.virtual],
  ] as const) {
    for (const [path, kind] of kinds) {
      for (const item of await client.list(path))
        search(`${side} ${kind} ${item.metadata?.namespace}/${item.metadata?.name}`, JSON.stringify(item));
    }
  }
  for (const item of await env.admin.list(`${MP}/virtualclusterinstances`))
    search(`VirtualClusterInstance ${item.metadata.namespace}/${item.metadata.name}`, JSON.stringify(item));
  search('the components’ logs', env.logs());
  // The audit log event by event, so that a test can tell a write that holds the value by design
  // (a synced copy's) from a leak.
  for (const line of readFileSync(env.auditLogPath, 'utf8').split('\n')) {
    if (!needles.some((needle) => line.includes(needle))) continue;
    let event: any;
    try {
      event = JSON.parse(line);
    } catch {
      found.push('the host apiserver’s audit log (a line that is not JSON)');
      continue;
    }
    found.push(`audit: ${event.verb} ${String(event.requestURI).split('?')[0]} by ${event.user?.username}`);
  }
  return [...new Set(found)];
}

/** A VirtualClusterInstance of mallory's in her namespace, reaching her virtual cluster; the answer. */
export function createInstanceAsMallory(env: TenantPlatform, name: string, config: unknown) {
  return env.mallory.call('POST', `${MP}/namespaces/${TEAM}/virtualclusterinstances`, {
    body: {
      apiVersion: V1,
      kind: 'VirtualClusterInstance',
      metadata: { name },
      spec: {
        endpoint: env.virtualCluster.server,
        caData: b64(env.virtualCluster.caPem),
        credentialsSecretRef: { name: 'vc-creds' },
        config: typeof config === 'string' ? config : stringify(config),
      },
    },
  });
}

/** The `Syncing` condition of mallory's instance `name` once `check` holds for it. */
export async function syncingWhen(
  env: TenantPlatform,
  name: string,
  check: (condition: any) => boolean,
  what: string,
  timeoutMs = 90_000,
): Promise<any> {
  let last: any;
  await eventually(
    async () => {
      last = conditionOf(
        await env.admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/${name}`),
        'Syncing',
      );
      return Boolean(last) && check(last);
    },
    timeoutMs,
    what,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last condition: ${JSON.stringify(last)}`);
  });
  return last;
}

/** The events.k8s.io Events of the virtual cluster about one object. */
export async function virtualEventsAbout(env: TenantPlatform, namespace: string, kind: string, name: string) {
  return (await env.virtual.list(`/apis/events.k8s.io/v1/namespaces/${namespace}/events`)).filter(
    (e: any) => e.regarding?.kind === kind && e.regarding?.name === name,
  );
}

/**
 * Waits until no write to `resources` happened for `quietMs` (bounded by `timeoutMs`), and
 * returns how many writes that took: a pair of controllers fighting over an object never gets
 * there.
 */
export async function settledWrites(
  env: TenantPlatform,
  resources: readonly string[],
  options: { quietMs?: number; timeoutMs?: number } = {},
): Promise<{ settled: boolean; writes: number }> {
  const quietMs = options.quietMs ?? 5_000;
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const start = await env.writesTo(resources);
  let last = start;
  let quietSince = Date.now();
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = await env.writesTo(resources);
    if (now !== last) {
      last = now;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= quietMs) return { settled: true, writes: now - start };
  }
  return { settled: false, writes: last - start };
}
