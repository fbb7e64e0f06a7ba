import {
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Team, User } from '../../src/api/identity.ts';
import type { Project } from '../../src/api/project.ts';
import { createOperator, defaultOperatorOptions } from '../../src/cli/operator.ts';
import { memberBindingName, PROJECT_ADMIN_CLUSTER_ROLE } from '../../src/controllers/project/desired.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';

const GROUP = 'management.platform';
const VERSION = 'v1';
const PLATFORM_NAMESPACE = 'platform-system';

// Projects, Users and Teams are cluster-scoped and project namespaces are deleted through the
// namespace controller, so this file runs its own apiserver with a controller manager.
describe('projects and team membership', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let kc: KubeConfig;
  let operator: Manager | undefined;
  beforeAll(async () => {
    cluster = await startCluster({ name: uniqueName('projects'), controllerManager: true });
    kc = kubeConfigFor(cluster);
    await installCrds(kc);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    operator = createOperator(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['project', 'teammembership'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
        logLevel: 'warn',
      }),
      pino({ level: 'silent' }),
    );
    await operator.start();
  });
  afterAll(async () => {
    await operator?.stop();
  });

  const custom = () => kc.makeApiClient(CustomObjectsApi);
  const core = () => kc.makeApiClient(CoreV1Api);
  const rbac = () => kc.makeApiClient(RbacAuthorizationV1Api);
  const create = (plural: string, kind: string, name: string, spec: unknown) =>
    custom().createClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural,
      body: { apiVersion: `${GROUP}/${VERSION}`, kind, metadata: { name }, spec },
    });
  const get = async <T>(plural: string, name: string) =>
    (await custom().getClusterCustomObject({ group: GROUP, version: VERSION, plural, name })) as T;
  /** JSON patch (client-node's default for custom objects) setting each given spec field. */
  const patchSpec = (plural: string, name: string, spec: Record<string, unknown>) =>
    custom().patchClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural,
      name,
      body: Object.entries(spec).map(([field, value]) => ({ op: 'add', path: `/spec/${field}`, value })),
    });
  const namespaceOf = async (name: string) =>
    core()
      .readNamespace({ name })
      .catch(() => undefined);
  /** RoleBindings in the namespace: cluster role -> subject names. */
  const bindings = async (namespace: string) => {
    const list = await rbac().listNamespacedRoleBinding({
      namespace,
      labelSelector: 'management.platform/project',
    });
    return Object.fromEntries(list.items.map((b) => [b.roleRef.name, (b.subjects ?? []).map((s) => s.name)]));
  };
  const readyOf = async (name: string) =>
    (await get<Project>('projects', name)).status?.conditions?.find((c) => c.type === 'Ready');

  test('a project gets its labelled namespace and member bindings, which follow changes and go with it', async () => {
    await create('projects', 'Project', 'shop', {
      owner: { user: 'alice' },
      members: [
        { kind: 'Team', name: 'ops', clusterRole: 'platform-project-viewer' },
        { kind: 'User', name: '*', clusterRole: 'platform-project-viewer' },
        { kind: 'User', name: 'bob', clusterRole: 'platform-project-user' },
      ],
    });
    await eventually(async () => (await readyOf('shop'))?.status === 'True', 30_000, 'shop Ready');
    const project = await get<Project>('projects', 'shop');
    expect(project.status?.namespace).toBe('p-shop');
    expect(project.metadata.finalizers).toContain('management.platform/cleanup');
    expect((await readyOf('shop'))?.observedGeneration).toBe(project.metadata.generation);
    const namespace = await namespaceOf('p-shop');
    expect(namespace?.metadata?.labels?.['management.platform/project']).toBe('shop');
    expect(namespace?.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Project', name: 'shop' });
    expect(await bindings('p-shop')).toEqual({
      [PROJECT_ADMIN_CLUSTER_ROLE]: ['platform:user:alice'],
      'platform-project-user': ['platform:user:bob'],
      'platform-project-viewer': ['platform:authenticated', 'platform:team:ops'],
    });

    // Bob leaves, carol becomes an admin, the `*` entry goes: bindings follow, nothing else moves.
    await patchSpec('projects', 'shop', {
      members: [
        { kind: 'Team', name: 'ops', clusterRole: 'platform-project-viewer' },
        { kind: 'User', name: 'carol', clusterRole: PROJECT_ADMIN_CLUSTER_ROLE },
      ],
    });
    const expected = {
      [PROJECT_ADMIN_CLUSTER_ROLE]: ['platform:user:alice', 'platform:user:carol'],
      'platform-project-viewer': ['platform:team:ops'],
    };
    await eventually(
      async () => JSON.stringify(await bindings('p-shop')) === JSON.stringify(expected),
      30_000,
      'bindings to follow the members',
    );

    // A hand edit of a binding is reverted.
    await rbac().patchNamespacedRoleBinding({
      namespace: 'p-shop',
      name: memberBindingName('platform-project-viewer'),
      body: [{ op: 'replace', path: '/subjects/0/name', value: 'platform:user:mallory' }],
    });
    await eventually(
      async () => JSON.stringify(await bindings('p-shop')) === JSON.stringify(expected),
      30_000,
      'the edited binding to be reverted',
    );

    // Deleting the project deletes its namespace through the finalizer, then the project goes.
    await custom().deleteClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'projects',
      name: 'shop',
    });
    await eventually(
      async () => (await get<Project>('projects', 'shop').catch(() => undefined)) === undefined,
      30_000,
      'the project to be gone',
    );
    const terminating = await namespaceOf('p-shop');
    expect(terminating === undefined || terminating.metadata?.deletionTimestamp !== undefined).toBe(true);
    await eventually(async () => (await namespaceOf('p-shop')) === undefined, 60_000, 'p-shop to be deleted');
  });

  test("a namespace that is not the project's is never adopted", async () => {
    await core().createNamespace({ body: { metadata: { name: 'p-taken' } } });
    await create('projects', 'Project', 'taken', { owner: { user: 'alice' } });
    await eventually(
      async () => (await readyOf('taken'))?.reason === 'NamespaceConflict',
      30_000,
      'conflict',
    );
    const namespace = await namespaceOf('p-taken');
    expect(namespace?.metadata?.labels?.['management.platform/project']).toBeUndefined();
    expect(namespace?.metadata?.ownerReferences).toBeUndefined();
    expect(await bindings('p-taken')).toEqual({});
  });

  test('the namespace prefix comes from the config; an existing project keeps its namespace', async () => {
    await create('projects', 'Project', 'before', {});
    await eventually(async () => (await readyOf('before'))?.status === 'True', 30_000, 'before Ready');
    await core().createNamespacedSecret({
      namespace: PLATFORM_NAMESPACE,
      body: {
        metadata: { name: 'platform-config' },
        stringData: { config: 'projectNamespacePrefix: team-\n' },
      },
    });
    await create('projects', 'Project', 'after', {});
    await eventually(
      async () => (await get<Project>('projects', 'after')).status?.namespace === 'team-after',
      30_000,
      'the new prefix',
    );
    expect(await namespaceOf('team-after')).toBeDefined();
    expect((await get<Project>('projects', 'before')).status?.namespace).toBe('p-before');
    expect(await namespaceOf('team-before')).toBeUndefined();
  });

  test("teams fill their users' status.teams, and a user removed from a team loses it", async () => {
    for (const user of ['dora', 'eve']) await create('users', 'User', user, {});
    await create('teams', 'Team', 'red', { users: ['dora', 'eve'] });
    await create('teams', 'Team', 'blue', { users: ['dora'] });
    const teamsOf = async (user: string) => (await get<User>('users', user)).status?.teams ?? [];
    await eventually(
      async () => JSON.stringify(await teamsOf('dora')) === '["blue","red"]',
      30_000,
      "dora's teams",
    );
    await eventually(async () => JSON.stringify(await teamsOf('eve')) === '["red"]', 30_000, "eve's teams");
    await patchSpec('teams', 'red', { users: ['dora'] });
    await eventually(async () => (await teamsOf('eve')).length === 0, 30_000, 'eve to leave red');
    await custom().deleteClusterCustomObject({
      group: GROUP,
      version: VERSION,
      plural: 'teams',
      name: 'blue',
    });
    await eventually(async () => JSON.stringify(await teamsOf('dora')) === '["red"]', 30_000, 'blue gone');
    // A user created after the team that lists it gets the team too.
    await patchSpec('teams', 'red', { users: ['dora', 'frank'] });
    await create('users', 'User', 'frank', {});
    await eventually(
      async () => JSON.stringify(await teamsOf('frank')) === '["red"]',
      30_000,
      "frank's teams",
    );
    expect((await get<Team>('teams', 'red')).spec.users).toEqual(['dora', 'frank']);
  });
});
