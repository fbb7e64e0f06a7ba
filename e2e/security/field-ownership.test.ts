// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, test } from 'vitest';
import { parse, stringify } from 'yaml';
import { INSTANCE_ANNOTATION, INSTANCE_UID_LABEL } from '../../src/api/labels.ts';
import { IDENTITY_REFRESHED_CONDITION } from '../../src/controllers/identityrefresh/desired.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { NAMESPACE } from '../chart/support.ts';
import { type ClusterManagerApi, startClusterManagerApi } from '../login/support/cluster-manager-api.ts';
import { eventually } from '../support/wait.ts';
import {
  b64,
  conditionOf,
  FINANCE,
  MALLORY,
  MP,
  settledWrites,
  TEAM,
  useTenantPlatform,
  V1,
} from './support.ts';

/**
 * No two controllers fight over one object: each field of each object has one owner. For every
 * pair of the platform's controllers that can touch the same kind, the overlap is made on
 * purpose, by whoever may make it (a project admin relabelling RoleBindings in her namespace, a
 * cluster admin labelling a synced Secret, a key in use), and then the apiserver's count of
 * writes to that kind must settle: stay unchanged for 5 s within a minute. The pair of two
 * syncers under one placement is driven in placement.test.ts. Identity refresh (src/login/
 * refresh.ts, in the controller) is driven through a stand-in cluster manager: refreshed again
 * and again beside the access-key controller on a Login key, and beside team membership on the
 * User and the Teams of its groups.
 */
describe('no two controllers fight over one object', () => {
  const env = useTenantPlatform({ gateway: true });
  const rbac = (namespace: string) =>
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`;
  const relabel = (path: string, metadata: Record<string, unknown>) =>
    env().lead.ok('PATCH', path, { body: { metadata }, contentType: 'application/merge-patch+json' });

  test('syncer and secretsync on a host Secret: a synced copy labelled for a SharedSecret stays the virtual one', async () => {
    const { virtual, admin } = env();
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'shared' },
      data: { note: b64('virtual') },
    });
    const path = `/api/v1/namespaces/${TEAM}/secrets/${hostNameLong('shared', 'apps', 'dev')}`;
    await eventually(async () => (await admin.get(path)) !== null, 60_000, 'the host copy');
    // A cluster admin (who may read prod-db, so admission lets the labels in) labels the copy.
    await admin.ok('PATCH', path, {
      body: {
        metadata: {
          labels: {
            'management.platform/sharedsecret-name': 'prod-db',
            'management.platform/sharedsecret-namespace': FINANCE,
          },
        },
      },
      contentType: 'application/merge-patch+json',
    });
    expect(await settledWrites(env(), ['secrets'])).toMatchObject({ settled: true });
    const copy = await admin.get(path);
    expect(copy.data).toEqual({ note: b64('virtual') });
  });

  test('project and sharedsecret controllers on RoleBindings: a projected binding labelled as a project member binding', async () => {
    const { admin } = env();
    await admin.create(`${MP}/namespaces/${TEAM}/sharedsecrets`, {
      apiVersion: V1,
      kind: 'SharedSecret',
      metadata: { name: 'team-db' },
      spec: {
        data: { password: b64('team') },
        access: [{ name: 'readers', verbs: ['get'], users: [MALLORY] }],
      },
    });
    const projected = async () =>
      (await admin.list(rbac(TEAM), 'management.platform/sharedsecret-uid')).filter(
        (b: any) => b.roleRef.kind === 'Role',
      );
    await eventually(async () => (await projected()).length === 1, 60_000, 'the projected RoleBinding');
    const [binding] = await projected();
    await relabel(`${rbac(TEAM)}/${binding.metadata.name}`, {
      labels: { 'management.platform/project': 'team' },
    });
    expect(await settledWrites(env(), ['rolebindings'])).toMatchObject({ settled: true });
    expect(await projected()).toHaveLength(1);
    const members = await admin.list(rbac(TEAM), 'management.platform/project=team');
    expect(members.map((b: any) => b.roleRef.name)).toEqual(
      expect.arrayContaining(['platform-project-admin', 'platform-project-user']),
    );
  });

  test("virtualcluster and project controllers on RoleBindings: the syncer's binding labelled as a member binding", async () => {
    const { admin } = env();
    const syncerBindings = () => admin.list(rbac(TEAM), INSTANCE_UID_LABEL);
    const [binding] = await syncerBindings();
    await relabel(`${rbac(TEAM)}/${binding.metadata.name}`, {
      labels: { 'management.platform/project': 'team' },
    });
    expect(await settledWrites(env(), ['rolebindings'])).toMatchObject({ settled: true });
    expect((await syncerBindings()).map((b: any) => b.metadata.name)).toContain(binding.metadata.name);
    await eventually(
      async () =>
        conditionOf(await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`), 'Syncing')
          ?.status === 'True',
      60_000,
      'the syncer to sync still',
    );
  });

  test('virtualcluster and sharedsecret controllers on RoleBindings: a projected binding labelled as a syncer binding', async () => {
    const { admin } = env();
    const instance = await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`);
    const projected = () => admin.list(rbac(TEAM), 'management.platform/sharedsecret-uid');
    await eventually(async () => (await projected()).length > 0, 60_000, 'a projected RoleBinding');
    const [binding] = await projected();
    await relabel(`${rbac(TEAM)}/${binding.metadata.name}`, {
      labels: { [INSTANCE_UID_LABEL]: instance.metadata.uid },
      annotations: { [INSTANCE_ANNOTATION]: `${TEAM}/dev` },
    });
    expect(await settledWrites(env(), ['rolebindings'])).toMatchObject({ settled: true });
    await eventually(async () => (await projected()).length > 0, 60_000, 'the projected RoleBinding back');
  });

  test('accesskey controller and gateway on an access key’s status: a key in use with an inactivity ttl', async () => {
    const { admin, gatewayUrl } = env();
    const generated = generateAccessKey(randomBytes);
    await admin.create(`${MP}/ownedaccesskeys`, {
      apiVersion: V1,
      kind: 'OwnedAccessKey',
      metadata: { name: 'in-use' },
      spec: { user: MALLORY, type: 'User', key: generated.key, ttl: 3600, ttlAfterLastActivity: true },
    });
    const use = () =>
      fetch(`${gatewayUrl}/kubernetes/management/apis`, {
        headers: { authorization: `Bearer ${generated.key}` },
      });
    await eventually(async () => (await use()).status === 200, 60_000, 'the gateway to accept the key');
    for (let i = 0; i < 5; i++) await use();
    await eventually(
      async () => Boolean((await admin.get(`${MP}/ownedaccesskeys/in-use`))?.status?.lastActivity),
      60_000,
      'the last activity recorded',
    );
    expect(
      await settledWrites(env(), ['ownedaccesskeys'], { quietMs: 15_000, timeoutMs: 90_000 }),
    ).toMatchObject({
      settled: true,
    });
  });

  // Identity refresh: a Login key signed in long ago through the cluster manager (its
  // `identityRefresh` in the past) is refreshed at once; setting it in the past again asks for
  // another refresh. The platform's configuration names the stand-in cluster manager.
  const PAST = '2020-01-01T00:00:00Z';
  let clusterManager: ClusterManagerApi | undefined;
  afterAll(() => clusterManager?.close());
  const refreshing = async (): Promise<ClusterManagerApi> => {
    if (clusterManager) return clusterManager;
    const { admin } = env();
    const api = await startClusterManagerApi();
    clusterManager = api;
    const path = `/api/v1/namespaces/${NAMESPACE}/secrets/platform-config`;
    const config = (parse(Buffer.from((await admin.get(path)).data.config, 'base64').toString('utf8')) ??
      {}) as Record<string, any>;
    config.auth = {
      ...config.auth,
      clusterManager: { host: api.host, bearerToken: api.adminKey(), insecure: true },
    };
    await admin.merge(path, { data: { config: b64(stringify(config)) } });
    return api;
  };
  /** A User bound to the cluster manager and a Login key of its, due for a refresh. */
  const loginKey = async (user: string, userId: string, groups: string[]) => {
    const { admin } = env();
    (await refreshing()).users.set(userId, { id: userId, username: user, enabled: true, groups: [] });
    await admin.create(`${MP}/users`, {
      apiVersion: V1,
      kind: 'User',
      metadata: { name: user, annotations: { 'login.management.platform/connector': 'clusterManager' } },
      spec: { username: user },
    });
    const identity = { connector: 'clusterManager', userId, username: user, groups };
    await admin.create(`${MP}/ownedaccesskeys`, {
      apiVersion: V1,
      kind: 'OwnedAccessKey',
      metadata: { name: `${user}-login` },
      spec: {
        user,
        type: 'Login',
        key: generateAccessKey(randomBytes).key,
        ttl: 3600,
        identity,
        identityRefresh: PAST,
      },
    });
    return { path: `${MP}/ownedaccesskeys/${user}-login`, identity };
  };
  /** Refreshed: a new `identityRefresh`, and both controllers' conditions on the key. */
  const refreshed = async (path: string, what: string) =>
    eventually(
      async () => {
        const key = await env().admin.get(path);
        return (
          key?.spec?.identityRefresh !== PAST &&
          conditionOf(key, IDENTITY_REFRESHED_CONDITION)?.status === 'True' &&
          conditionOf(key, 'Ready')?.status === 'True'
        );
      },
      60_000,
      what,
    );

  test('identityrefresh and the accesskey controller on a Login key: refreshed again and again, both keep their condition', async () => {
    const { admin } = env();
    const key = await loginKey('ref-key-user', 'u-ref-key', []);
    await refreshed(key.path, 'the first refresh');
    for (let i = 1; i <= 3; i++) {
      await admin.merge(key.path, { spec: { identityRefresh: PAST } });
      await refreshed(key.path, `refresh ${i + 1}`);
    }
    expect(await settledWrites(env(), ['ownedaccesskeys', 'users', 'teams'])).toMatchObject({
      settled: true,
    });
    const settled = await admin.get(key.path);
    expect(conditionOf(settled, 'Ready')?.status).toBe('True');
    expect(conditionOf(settled, IDENTITY_REFRESHED_CONDITION)).toMatchObject({
      status: 'True',
      reason: 'Refreshed',
    });
    expect(settled.spec.disabled).not.toBe(true);
  });

  test("identityrefresh and team membership on a User and its Teams: the groups change at each refresh, the User's teams follow", async () => {
    const { admin } = env();
    const user = 'ref-team-user';
    const key = await loginKey(user, 'u-ref-team', ['ref-blue']);
    const teamsOf = async () => (await admin.get(`${MP}/users/${user}`))?.status?.teams ?? [];
    const membersOf = async (team: string) => (await admin.get(`${MP}/teams/${team}`))?.spec?.users ?? [];
    for (const groups of [['ref-blue'], ['ref-blue', 'ref-green'], ['ref-green']]) {
      if (groups.length !== 1 || groups[0] !== 'ref-blue')
        await admin.merge(key.path, {
          spec: { identity: { ...key.identity, groups }, identityRefresh: PAST },
        });
      await refreshed(key.path, `the refresh with groups ${groups.join(', ')}`);
      await eventually(
        async () =>
          JSON.stringify((await admin.get(`${MP}/users/${user}`))?.spec?.groups) === JSON.stringify(groups) &&
          JSON.stringify(await teamsOf()) === JSON.stringify([...groups].sort()) &&
          (await membersOf('ref-blue')).includes(user) === groups.includes('ref-blue'),
        60_000,
        `the User's groups and teams to be ${groups.join(', ')}`,
      );
    }
    expect(await settledWrites(env(), ['users', 'teams', 'ownedaccesskeys'])).toMatchObject({
      settled: true,
    });
    expect(await teamsOf()).toEqual(['ref-green']);
    expect(await membersOf('ref-green')).toEqual([user]);
    expect(await membersOf('ref-blue')).toEqual([]);
    expect(conditionOf(await admin.get(`${MP}/users/${user}`), 'Ready')?.status).toBe('True');
  });
});
