import { CoreV1Api, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { INSTANCE_UID_LABEL, PROJECT_LABEL } from '../../src/api/labels.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { createControllerManager } from '../../src/cli/controller.ts';
import { defaultOperatorOptions } from '../../src/cli/operator.ts';
import { desiredRbac } from '../../src/controllers/sharedsecret/desired.ts';
import { SYNCER_CLUSTER_ROLES } from '../../src/controllers/virtualcluster/identity.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { installPlatformRoles } from '../../src/dev/install-rbac.ts';
import { collectionPath, KubeClient, objectPath, type ResourceRef } from '../../src/runtime/kube-client.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, kubectl, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';
import {
  chartReadmeScripts,
  documentedScripts,
  type Health,
  healthBinary,
  healthOf,
} from './health-support.ts';

/**
 * GitOps health with the tools' own code: every kind we own is driven through its states on a
 * kube-apiserver of its own (created, progressing, ready, spec changed and not yet observed,
 * failing and retried, stalled, disabled, being deleted), and at each step the object, read back
 * with kubectl, is given to kstatus (sigs.k8s.io/cli-utils) and to the Argo CD health script of
 * docs/gitops-health.md run by gopher-lua as Argo CD runs it. The verdicts must be the ones the
 * page's table promises. Failures are made real: a ValidatingAdmissionPolicy refuses the write the
 * controller needs, a namespace or Role belongs to someone else, a cluster (or a virtual cluster,
 * an apiserver of its own) refuses the credentials; a syncer waits for permissions it lacks.
 * The controllers run in this process so that they can be stopped to catch an object before they
 * saw it (created, spec changed). `kubectl wait --for=condition=Ready` is run for each kind.
 */

const GV = `${API_GROUP}/${API_VERSION}`;
const PLATFORM_NAMESPACE = 'platform-system';
const TEAM_NAMESPACE = 'team-a';
const HOLD = 'e2e.platform/hold';

const resourceOf = (plural: string, namespaced: boolean): ResourceRef => ({
  group: API_GROUP,
  version: API_VERSION,
  plural,
  namespaced,
});
const kinds = {
  SharedSecret: resourceOf('sharedsecrets', true),
  OwnedAccessKey: resourceOf('ownedaccesskeys', false),
  User: resourceOf('users', false),
  Team: resourceOf('teams', false),
  Project: resourceOf('projects', false),
  Cluster: resourceOf('clusters', false),
  VirtualClusterInstance: resourceOf('virtualclusterinstances', true),
} as const;
type Kind = keyof typeof kinds;
const core = (plural: string, group = '', version = 'v1', namespaced = true): ResourceRef => ({
  group,
  version,
  plural,
  namespaced,
});

/** A condition of an object as read back. */
const conditionOf = (obj: KubernetesObject, type: string) =>
  (
    obj as { status?: { conditions?: Array<{ type: string; status: string; reason: string }> } }
  ).status?.conditions?.find((c) => c.type === type);

interface Expected {
  kstatus: 'Current' | 'InProgress' | 'Failed' | 'Terminating';
  argocd: 'Healthy' | 'Progressing' | 'Degraded' | 'Suspended' | null;
}

const FAILING: Expected = { kstatus: 'InProgress', argocd: 'Degraded' };
const STALLED: Expected = { kstatus: 'Failed', argocd: 'Degraded' };

describe('GitOps health: kstatus and the documented Argo CD scripts, every kind through its states', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  /** The virtual cluster of the VirtualClusterInstances: an apiserver of its own. */
  let virtual: Cluster;
  let kc: KubeConfig;
  let api: KubeClient;
  let scripts: Record<string, string>;
  let controllers: Manager | undefined;

  const startControllers = async () => {
    controllers = createControllerManager(
      defaultOperatorOptions({
        kubeconfig: cluster.kubeconfigPath,
        namespace: PLATFORM_NAMESPACE,
        controllers: ['sharedsecret', 'accesskey', 'teammembership', 'project', 'cluster', 'virtualcluster'],
        leaderElect: false,
        healthPort: 0,
        healthHost: '127.0.0.1',
      }),
      pino({ level: 'silent' }),
    );
    await controllers.start();
  };
  const stopControllers = async () => {
    await controllers?.stop();
    controllers = undefined;
  };

  beforeAll(async () => {
    await healthBinary();
    // With a controller manager: namespaces finish deleting, garbage collection runs.
    cluster = await startCluster({ name: uniqueName('health'), controllerManager: true });
    virtual = await startCluster({ name: uniqueName('health-vc') });
    kc = kubeConfigFor(cluster);
    api = new KubeClient(kc);
    await installCrds(kc);
    const coreApi = kc.makeApiClient(CoreV1Api);
    for (const name of [PLATFORM_NAMESPACE, TEAM_NAMESPACE])
      await coreApi.createNamespace({ body: { metadata: { name } } });
    scripts = documentedScripts();
  }, 600_000);
  afterAll(async () => {
    await stopControllers();
    api?.close();
  });

  const create = (kind: Kind, name: string, spec: unknown, namespace?: string) =>
    api.request({
      method: 'POST',
      path: collectionPath(kinds[kind], namespace),
      body: { apiVersion: GV, kind, metadata: { name }, spec },
    });
  const mergePatch = (resource: ResourceRef, name: string, body: unknown, namespace?: string) =>
    api.request({
      method: 'PATCH',
      path: objectPath(resource, namespace, name),
      body,
      contentType: 'application/merge-patch+json',
    });

  /** The object as a GitOps tool reads it: `kubectl get -o json`. */
  const read = async (kind: Kind, name: string, namespace?: string): Promise<KubernetesObject> => {
    const result = await kubectl(
      [
        'get',
        `${kinds[kind].plural}.${API_GROUP}`,
        name,
        ...(namespace ? ['-n', namespace] : []),
        '-o',
        'json',
      ],
      { kubeconfig: cluster.kubeconfigPath },
    );
    if (result.code !== 0) throw new Error(`kubectl get ${kind} ${name}: ${result.stderr}`);
    return JSON.parse(result.stdout) as KubernetesObject;
  };

  const verdictOf = async (kind: Kind, name: string, namespace?: string): Promise<Health> => {
    const [health] = await healthOf([await read(kind, name, namespace)], scripts);
    return health!;
  };

  /**
   * Waits until kstatus and the Argo CD script say `expected` about the object (the controllers
   * work asynchronously), then asserts it, so that a failure shows what they last said.
   */
  const expectHealth = async (
    kind: Kind,
    name: string,
    expected: Expected,
    what: string,
    namespace?: string,
  ): Promise<KubernetesObject> => {
    let last: Health | undefined;
    await eventually(
      async () => {
        last = await verdictOf(kind, name, namespace);
        return last.kstatus.status === expected.kstatus && (last.argocd?.status ?? null) === expected.argocd;
      },
      60_000,
      `${kind} ${name} ${what}`,
    ).catch((err: Error) => {
      // Timed out: the assertion below shows what the tools said last.
      if (!last) throw err;
    });
    expect(
      { kstatus: last?.kstatus.status, argocd: last?.argocd?.status ?? null },
      `${kind} ${name} ${what}: ${JSON.stringify(last)}`,
    ).toEqual(expected);
    const object = await read(kind, name, namespace);
    // docs/gitops-health.md: every condition carries observedGeneration too, in every state.
    const conditions =
      (object as { status?: { conditions?: { type: string; observedGeneration?: unknown }[] } }).status
        ?.conditions ?? [];
    for (const condition of conditions)
      expect(typeof condition.observedGeneration, `${kind} ${name} ${what}: ${condition.type}`).toBe(
        'number',
      );
    return object;
  };

  const kubectlWait = (kind: Kind, name: string, timeout: string, namespace?: string) =>
    kubectl(
      [
        'wait',
        '--for=condition=Ready',
        `${kinds[kind].plural}.${API_GROUP}/${name}`,
        ...(namespace ? ['-n', namespace] : []),
        `--timeout=${timeout}`,
      ],
      { kubeconfig: cluster.kubeconfigPath },
    );

  /**
   * The states every kind goes through: created while the controllers do not run (no status),
   * ready once they do (and `kubectl wait` agrees), then a spec change made while they are
   * stopped again, not yet observed. The controllers run again afterwards.
   */
  const createdReadyChanged = async (
    kind: Kind,
    name: string,
    spec: unknown,
    change: unknown,
    namespace?: string,
  ) => {
    await stopControllers();
    await create(kind, name, spec, namespace);
    const created = await expectHealth(
      kind,
      name,
      { kstatus: 'Current', argocd: 'Progressing' },
      'created',
      namespace,
    );
    // No status yet: kstatus reads that as Current (docs/gitops-health.md says why it cannot tell).
    expect((created as { status?: unknown }).status).toBeUndefined();
    await startControllers();
    const ready = await expectHealth(
      kind,
      name,
      { kstatus: 'Current', argocd: 'Healthy' },
      'ready',
      namespace,
    );
    // docs/gitops-health.md: Reconciling is absent once converged.
    expect(conditionOf(ready, 'Reconciling'), `${kind} ${name}`).toBeUndefined();
    expect((await kubectlWait(kind, name, '60s', namespace)).code).toBe(0);
    await stopControllers();
    await mergePatch(kinds[kind], name, { spec: change }, namespace);
    await expectHealth(
      kind,
      name,
      { kstatus: 'InProgress', argocd: 'Progressing' },
      'spec changed, not observed',
      namespace,
    );
    await startControllers();
  };

  const gone = (kind: Kind, name: string, what: string, namespace?: string) =>
    eventually(
      () =>
        read(kind, name, namespace).then(
          () => false,
          () => true,
        ),
      60_000,
      what,
    );

  /** Held by a finalizer of the test's own, then deleted: the object stays in its deleting state. */
  const deleteHeld = async (kind: Kind, name: string, namespace?: string) => {
    const current = await read(kind, name, namespace);
    await mergePatch(
      kinds[kind],
      name,
      { metadata: { finalizers: [...(current.metadata?.finalizers ?? []), HOLD] } },
      namespace,
    );
    await api.request({ method: 'DELETE', path: objectPath(kinds[kind], namespace, name) });
    await expectHealth(
      kind,
      name,
      { kstatus: 'Terminating', argocd: 'Progressing' },
      'being deleted',
      namespace,
    );
    const held = await read(kind, name, namespace);
    await api.request({
      method: 'PATCH',
      path: objectPath(kinds[kind], namespace, name),
      contentType: 'application/json-patch+json',
      body: [
        { op: 'test', path: '/metadata/finalizers', value: held.metadata?.finalizers },
        {
          op: 'replace',
          path: '/metadata/finalizers',
          value: (held.metadata?.finalizers ?? []).filter((f) => f !== HOLD),
        },
      ],
    });
  };

  /**
   * A ValidatingAdmissionPolicy that refuses `operations` on `resource` (in `namespace`, or the
   * objects named `names`) with 403 Forbidden, as an admission policy or quota of a real cluster
   * would. Returns once the apiserver enforces it (a dry-run of such a request is refused), and
   * gives back its removal.
   */
  const refuse = async (
    name: string,
    rule: { apiGroups: string[]; resources: string[]; operations: string[]; resourceNames?: string[] },
    namespace: string | undefined,
    probe: () => Promise<unknown>,
  ): Promise<() => Promise<void>> => {
    const policies = core('validatingadmissionpolicies', 'admissionregistration.k8s.io', 'v1', false);
    const bindings = core('validatingadmissionpolicybindings', 'admissionregistration.k8s.io', 'v1', false);
    await api.request({
      method: 'POST',
      path: collectionPath(policies),
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicy',
        metadata: { name },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: { resourceRules: [{ ...rule, apiVersions: ['*'] }] },
          validations: [
            { expression: 'false', message: `refused by the test (${name})`, reason: 'Forbidden' },
          ],
        },
      },
    });
    await api.request({
      method: 'POST',
      path: collectionPath(bindings),
      body: {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingAdmissionPolicyBinding',
        metadata: { name },
        spec: {
          policyName: name,
          validationActions: ['Deny'],
          ...(namespace
            ? {
                matchResources: {
                  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
                },
              }
            : {}),
        },
      },
    });
    await eventually(
      () =>
        probe().then(
          () => false,
          (err: { code?: number }) => err.code === 403,
        ),
      30_000,
      `policy ${name} to be enforced`,
    );
    return async () => {
      await api.request({ method: 'DELETE', path: objectPath(bindings, undefined, name) });
      await api.request({ method: 'DELETE', path: objectPath(policies, undefined, name) });
      await eventually(
        () =>
          probe().then(
            () => true,
            () => false,
          ),
        30_000,
        `policy ${name} to be gone`,
      );
    };
  };
  const dryRun = { dryRun: 'All' };

  test('the Argo CD scripts of the docs and of the chart README are the same, for every kind that writes Ready', () => {
    expect(chartReadmeScripts()).toEqual(scripts);
    expect(Object.keys(scripts).sort()).toEqual(
      ['Cluster', 'OwnedAccessKey', 'Project', 'SharedSecret', 'Team', 'User', 'VirtualClusterInstance'].map(
        (kind) => `${API_GROUP}/${kind}`,
      ),
    );
  });

  test('SharedSecret: created, ready, changed, failing and retried, recovered, stalled, deleted', async () => {
    const ns = TEAM_NAMESPACE;
    const rule = (name: string, verbs: string[]) => ({ name, verbs, users: ['alice'] });
    await createdReadyChanged(
      'SharedSecret',
      'db',
      { data: { v: 'eA==' }, access: [rule('read', ['get'])] },
      { access: [rule('read', ['get']), rule('ops', ['get', 'update'])] },
      ns,
    );
    await expectHealth('SharedSecret', 'db', { kstatus: 'Current', argocd: 'Healthy' }, 'ready again', ns);

    // A new rule's Role is refused by admission: Ready=False, retried.
    const allow = await refuse(
      'no-roles',
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles'], operations: ['CREATE'] },
      ns,
      () =>
        api.request({
          method: 'POST',
          path: collectionPath(core('roles', 'rbac.authorization.k8s.io'), ns),
          query: dryRun,
          body: {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'Role',
            metadata: { name: 'probe' },
            rules: [],
          },
        }),
    );
    await mergePatch(
      kinds.SharedSecret,
      'db',
      { spec: { access: [rule('read', ['get']), rule('ops', ['get', 'update']), rule('audit', ['list'])] } },
      ns,
    );
    const failing = await expectHealth('SharedSecret', 'db', FAILING, 'failing, retried', ns);
    expect(conditionOf(failing, 'Ready')).toMatchObject({ status: 'False', reason: 'Forbidden' });
    expect(conditionOf(failing, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'ProgressingWithRetry',
    });
    // And a Warning Event says so.
    const events = await api.request<{
      items: Array<{ type: string; reason: string; regarding: { name: string } }>;
    }>({
      method: 'GET',
      path: collectionPath(core('events', 'events.k8s.io'), ns),
    });
    expect(
      events.items.some((e) => e.type === 'Warning' && e.reason === 'Forbidden' && e.regarding.name === 'db'),
    ).toBe(true);
    expect((await kubectlWait('SharedSecret', 'db', '2s', ns)).code).not.toBe(0);

    await allow();
    await expectHealth('SharedSecret', 'db', { kstatus: 'Current', argocd: 'Healthy' }, 'recovered', ns);

    // A Role of the projected name controlled by another owner is never adopted: stalled.
    const owner = await api.request<KubernetesObject>({
      method: 'POST',
      path: collectionPath(core('configmaps'), ns),
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'someone-else' } },
    });
    const taken = desiredRbac({
      apiVersion: GV,
      kind: 'SharedSecret',
      metadata: { name: 'taken', namespace: ns, uid: 'any' },
      spec: { data: {}, access: [rule('read', ['get'])] },
    }).roles[0]!;
    await api.request({
      method: 'POST',
      path: collectionPath(core('roles', 'rbac.authorization.k8s.io'), ns),
      body: {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: {
          name: taken.metadata!.name,
          ownerReferences: [
            {
              apiVersion: 'v1',
              kind: 'ConfigMap',
              name: 'someone-else',
              uid: owner.metadata!.uid!,
              controller: true,
            },
          ],
        },
        rules: [],
      },
    });
    await create('SharedSecret', 'taken', { data: {}, access: [rule('read', ['get'])] }, ns);
    const stalled = await expectHealth('SharedSecret', 'taken', STALLED, 'stalled', ns);
    expect(conditionOf(stalled, 'Stalled')).toMatchObject({ reason: 'ProjectionRejected' });

    await deleteHeld('SharedSecret', 'db', ns);
  });

  test('OwnedAccessKey: created, ready, changed, disabled, failing and retried (its expiry refused), deleted', async () => {
    const key = (extra: Record<string, unknown> = {}) => ({
      user: 'alice',
      type: 'User',
      keyId: uniqueName('k').replace('-', ''),
      keyHash: 'a'.repeat(64),
      ...extra,
    });
    await createdReadyChanged('OwnedAccessKey', 'ci', key(), { displayName: 'CI key' });
    await mergePatch(kinds.OwnedAccessKey, 'ci', { spec: { disabled: true } });
    await expectHealth('OwnedAccessKey', 'ci', { kstatus: 'Current', argocd: 'Suspended' }, 'disabled');

    // A key past its deadline whose deletion admission refuses: Ready=False, retried. (The probe
    // is a dry-run deletion of a key that exists: a missing one is answered 404 before admission.)
    await create('OwnedAccessKey', 'probe-key', key());
    const allow = await refuse(
      'no-key-deletion',
      {
        apiGroups: [API_GROUP],
        resources: ['ownedaccesskeys'],
        operations: ['DELETE'],
        resourceNames: ['expiring', 'probe-key'],
      },
      undefined,
      () =>
        api.request({
          method: 'DELETE',
          path: objectPath(kinds.OwnedAccessKey, undefined, 'probe-key'),
          query: dryRun,
        }),
    );
    await create('OwnedAccessKey', 'expiring', key({ ttl: 1 }));
    await expectHealth('OwnedAccessKey', 'expiring', FAILING, 'expired, deletion refused');
    await allow();
    await gone('OwnedAccessKey', 'expiring', 'the expired key to be deleted');
    await deleteHeld('OwnedAccessKey', 'ci');
  });

  test('User: created, ready, changed, deleted; Team: created, ready, changed, its status following the generation', async () => {
    await createdReadyChanged('User', 'alice', { username: 'alice' }, { displayName: 'Alice' });
    await expectHealth('User', 'alice', { kstatus: 'Current', argocd: 'Healthy' }, 'ready again');
    await createdReadyChanged('Team', 'ops', { users: ['alice'] }, { displayName: 'Operations' });
    const team = (await expectHealth(
      'Team',
      'ops',
      { kstatus: 'Current', argocd: 'Healthy' },
      'ready again',
    )) as {
      metadata: { generation?: number };
      status?: { observedGeneration?: number; conditions?: { type: string; observedGeneration?: number }[] };
    };
    expect(team.metadata.generation).toBe(2);
    expect(team.status?.observedGeneration).toBe(team.metadata.generation);
    expect(team.status?.conditions?.find((c) => c.type === 'Ready')?.observedGeneration).toBe(2);

    // Progressing: while a listed User's status.teams cannot follow the team (its status writes
    // refused here), the Team waits with MembershipPending; once they can, it is ready.
    await create('User', 'bob', { username: 'bob' });
    await expectHealth('User', 'bob', { kstatus: 'Current', argocd: 'Healthy' }, 'ready');
    const allow = await refuse(
      'no-user-status',
      { apiGroups: [API_GROUP], resources: ['users/status'], operations: ['UPDATE'] },
      undefined,
      () =>
        api.request({
          method: 'PATCH',
          path: `${objectPath(kinds.User, undefined, 'bob')}/status`,
          query: dryRun,
          contentType: 'application/merge-patch+json',
          body: { status: { teams: ['probe'] } },
        }),
    );
    await create('Team', 'devs', { users: ['bob'] });
    const pending = await expectHealth(
      'Team',
      'devs',
      { kstatus: 'InProgress', argocd: 'Progressing' },
      'progressing, its membership pending',
    );
    expect(conditionOf(pending, 'Ready')).toMatchObject({ status: 'Unknown', reason: 'MembershipPending' });
    expect(conditionOf(pending, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'MembershipPending',
    });
    expect((await kubectlWait('Team', 'devs', '2s')).code).not.toBe(0);
    await allow();
    await expectHealth('Team', 'devs', { kstatus: 'Current', argocd: 'Healthy' }, 'ready once bob follows');
    await deleteHeld('User', 'alice');
  });

  test('Project: created, ready, changed, failing and retried, waiting for a namespace, stalled, deleted', async () => {
    await createdReadyChanged(
      'Project',
      'shop',
      { owner: { user: 'alice' } },
      { members: [{ kind: 'User', name: 'bob', clusterRole: 'view' }] },
    );
    await expectHealth('Project', 'shop', { kstatus: 'Current', argocd: 'Healthy' }, 'ready again');
    // A new member's RoleBinding is refused by admission: Ready=False, retried.
    const allow = await refuse(
      'no-member-bindings',
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['rolebindings'], operations: ['CREATE'] },
      'p-shop',
      () =>
        api.request({
          method: 'POST',
          path: collectionPath(core('rolebindings', 'rbac.authorization.k8s.io'), 'p-shop'),
          query: dryRun,
          body: {
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name: 'probe' },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
          },
        }),
    );
    await mergePatch(kinds.Project, 'shop', {
      spec: {
        members: [
          { kind: 'User', name: 'bob', clusterRole: 'view' },
          { kind: 'User', name: 'carol', clusterRole: 'edit' },
        ],
      },
    });
    await expectHealth('Project', 'shop', FAILING, 'failing, retried');
    await allow();
    await expectHealth('Project', 'shop', { kstatus: 'Current', argocd: 'Healthy' }, 'recovered');

    // Deleted and created again while its namespace is still being deleted (an object in it holds
    // it): the new project waits for the namespace, then takes it up.
    await api.request({
      method: 'POST',
      path: collectionPath(core('configmaps'), 'p-shop'),
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'held', finalizers: [HOLD] } },
    });
    await api.request({ method: 'DELETE', path: objectPath(kinds.Project, undefined, 'shop') });
    await gone('Project', 'shop', 'the project to be deleted');
    await create('Project', 'shop', { owner: { user: 'alice' } });
    const waiting = await expectHealth(
      'Project',
      'shop',
      { kstatus: 'InProgress', argocd: 'Progressing' },
      'waiting for its namespace',
    );
    expect(conditionOf(waiting, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'WaitingForNamespace',
    });
    await mergePatch(core('configmaps'), 'held', { metadata: { finalizers: null } }, 'p-shop');
    await expectHealth(
      'Project',
      'shop',
      { kstatus: 'Current', argocd: 'Healthy' },
      'ready in its new namespace',
    );

    // Its namespace exists and is somebody else's: stalled.
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'p-taken' } } });
    await create('Project', 'taken', { owner: { user: 'alice' } });
    await expectHealth('Project', 'taken', STALLED, 'stalled');
    expect((await kubectlWait('Project', 'taken', '2s')).code).not.toBe(0);

    await deleteHeld('Project', 'shop');
  });

  const b64 = (text: string) => Buffer.from(text).toString('base64');
  /** Credentials Secrets in `namespace`: `tokens` by Secret name. */
  const tokenSecrets = async (namespace: string, tokens: Record<string, string>) => {
    const coreApi = kc.makeApiClient(CoreV1Api);
    for (const [name, token] of Object.entries(tokens))
      await coreApi.createNamespacedSecret({
        namespace,
        body: { metadata: { name }, data: { token: b64(token) } },
      });
  };

  test('Cluster: created, ready, changed, failing and retried (credentials refused), stalled (none), deleted', async () => {
    await tokenSecrets(PLATFORM_NAMESPACE, { self: cluster.adminToken, wrong: 'not-a-token' });
    const spec = (secret?: string) => ({
      endpoint: cluster.server,
      caData: b64(cluster.caPem),
      ...(secret ? { credentialsSecretRef: { name: secret, namespace: PLATFORM_NAMESPACE } } : {}),
    });
    await createdReadyChanged('Cluster', 'self', spec('self'), { displayName: 'this cluster' });
    await create('Cluster', 'refused', spec('wrong'));
    await expectHealth('Cluster', 'refused', FAILING, 'failing, retried');
    await create('Cluster', 'nocreds', spec());
    await expectHealth('Cluster', 'nocreds', STALLED, 'stalled');
    await deleteHeld('Cluster', 'self');
  });

  test('VirtualClusterInstance: created, ready, changed, progressing (its syncer starting), failing and retried (credentials refused), stalled (no credentials, an invalid configuration, a placement another instance holds or outside its project) until that changes, deleted', async () => {
    const ns = TEAM_NAMESPACE;
    await tokenSecrets(ns, { 'vc-admin': virtual.adminToken, 'vc-wrong': 'not-a-token' });
    const spec = (secret: string) => ({
      endpoint: virtual.server,
      caData: b64(virtual.caPem),
      credentialsSecretRef: { name: secret },
    });
    // Reachability alone (no syncer) for the states every kind shares.
    await createdReadyChanged('VirtualClusterInstance', 'dev', spec('vc-admin'), { displayName: 'dev' }, ns);
    await expectHealth(
      'VirtualClusterInstance',
      'dev',
      { kstatus: 'Current', argocd: 'Healthy' },
      'ready again',
      ns,
    );

    // A syncer is configured while the ClusterRole it is bound to for Services is missing: it waits
    // for its permissions, then starts without them and cannot fill its caches. Progressing, for
    // as long as that lasts.
    await api.request({
      method: 'DELETE',
      path: objectPath(
        core('clusterroles', 'rbac.authorization.k8s.io', 'v1', false),
        undefined,
        SYNCER_CLUSTER_ROLES.Service,
      ),
    });
    await mergePatch(
      kinds.VirtualClusterInstance,
      'dev',
      { spec: { config: 'sync:\n  toHost:\n    endpoints:\n      enabled: false\n' } },
      ns,
    );
    // The starting state as written for the new generation (not the spec change not yet seen).
    await eventually(
      async () => {
        const obj = await read('VirtualClusterInstance', 'dev', ns);
        const { observedGeneration } = (obj as { status?: { observedGeneration?: number } }).status ?? {};
        return (
          observedGeneration === obj.metadata?.generation && conditionOf(obj, 'Ready')?.status === 'Unknown'
        );
      },
      60_000,
      'the syncer starting',
    );
    const dev = (expected: Expected, what: string) =>
      expectHealth('VirtualClusterInstance', 'dev', expected, what, ns);
    const starting = await dev({ kstatus: 'InProgress', argocd: 'Progressing' }, 'its syncer starting');
    expect(conditionOf(starting, 'Ready')).toMatchObject({ status: 'Unknown', reason: 'Starting' });
    expect(conditionOf(starting, 'Reconciling')).toMatchObject({ status: 'True', reason: 'Starting' });
    expect(conditionOf(starting, 'Syncing')).toMatchObject({ status: 'Unknown', reason: 'Starting' });
    // The role back: the syncer fills its caches and syncs.
    await installPlatformRoles(api);
    const syncing = await dev({ kstatus: 'Current', argocd: 'Healthy' }, 'syncing');
    expect(conditionOf(syncing, 'Syncing')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(syncing.metadata?.finalizers).toContain('management.platform/cleanup');

    // The virtual cluster refuses the credentials: Ready=False, probed again.
    await create('VirtualClusterInstance', 'refused', spec('vc-wrong'), ns);
    const refused = await expectHealth('VirtualClusterInstance', 'refused', FAILING, 'failing, retried', ns);
    expect(conditionOf(refused, 'Ready')).toMatchObject({ status: 'False', reason: 'Unauthorized' });
    expect(conditionOf(refused, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'ProgressingWithRetry',
    });
    expect((await kubectlWait('VirtualClusterInstance', 'refused', '2s', ns)).code).not.toBe(0);

    // No spec.credentialsSecretRef: nothing to reach it with until the spec names some. Stalled
    // (Ready=False keeps the reason CredentialsMissing), then ready once the spec changes.
    await create(
      'VirtualClusterInstance',
      'nocreds',
      { endpoint: virtual.server, caData: b64(virtual.caPem) },
      ns,
    );
    const nocreds = await expectHealth(
      'VirtualClusterInstance',
      'nocreds',
      STALLED,
      'stalled (no credentials)',
      ns,
    );
    expect(conditionOf(nocreds, 'Stalled')).toMatchObject({ status: 'True', reason: 'CredentialsMissing' });
    expect(conditionOf(nocreds, 'Ready')).toMatchObject({ status: 'False', reason: 'CredentialsMissing' });
    expect(conditionOf(nocreds, 'Reconciling')).toBeUndefined();
    expect((await kubectlWait('VirtualClusterInstance', 'nocreds', '2s', ns)).code).not.toBe(0);
    await mergePatch(kinds.VirtualClusterInstance, 'nocreds', { spec: spec('vc-admin') }, ns);
    const given = await expectHealth(
      'VirtualClusterInstance',
      'nocreds',
      { kstatus: 'Current', argocd: 'Healthy' },
      'credentials given',
      ns,
    );
    expect(conditionOf(given, 'Stalled')).toBeUndefined();

    // A configuration the syncer cannot run (admission refuses one; the webhook does not run here).
    await create('VirtualClusterInstance', 'badconfig', { ...spec('vc-admin'), config: 'sync: [' }, ns);
    const badconfig = await expectHealth(
      'VirtualClusterInstance',
      'badconfig',
      STALLED,
      'stalled (invalid configuration)',
      ns,
    );
    expect(conditionOf(badconfig, 'Stalled')).toMatchObject({ status: 'True', reason: 'InvalidConfig' });
    expect(conditionOf(badconfig, 'Syncing')).toMatchObject({ status: 'False', reason: 'InvalidConfig' });

    // A second instance under the placement `dev` holds (its namespace, virtual cluster "dev"):
    // refused it, stalled, until the placement is free (dev deleted below), which it is looked at
    // again for although it did not change itself.
    await create(
      'VirtualClusterInstance',
      'twin',
      {
        ...spec('vc-admin'),
        clusterRef: { cluster: 'local', namespace: ns, virtualCluster: 'dev' },
        config: 'sync:\n  toHost:\n    endpoints:\n      enabled: false\n',
      },
      ns,
    );
    const twin = await expectHealth(
      'VirtualClusterInstance',
      'twin',
      STALLED,
      'stalled (placement held)',
      ns,
    );
    expect(conditionOf(twin, 'Stalled')).toMatchObject({ status: 'True', reason: 'PlacementNotAllowed' });
    expect(conditionOf(twin, 'Syncing')).toMatchObject({ status: 'False', reason: 'PlacementNotAllowed' });

    // Placed in a namespace outside its project (it has none; admission would refuse that): refused
    // and stalled until the namespaces' projects say otherwise, which it is looked at again for.
    const elsewhere = 'team-b';
    const coreApi = kc.makeApiClient(CoreV1Api);
    await coreApi.createNamespace({ body: { metadata: { name: elsewhere } } });
    await create(
      'VirtualClusterInstance',
      'moved',
      {
        ...spec('vc-admin'),
        clusterRef: { cluster: 'local', namespace: elsewhere, virtualCluster: 'moved' },
        config: 'sync:\n  toHost:\n    endpoints:\n      enabled: false\n',
      },
      ns,
    );
    const moved = await expectHealth(
      'VirtualClusterInstance',
      'moved',
      STALLED,
      'stalled (outside its project)',
      ns,
    );
    expect(conditionOf(moved, 'Stalled')).toMatchObject({ status: 'True', reason: 'PlacementNotAllowed' });
    // Its own namespace last: the change that frees it is not of the namespace it syncs into.
    for (const name of [elsewhere, ns])
      await mergePatch(core('namespaces', '', 'v1', false), name, {
        metadata: { labels: { [PROJECT_LABEL]: 'vcs' } },
      });
    await expectHealth(
      'VirtualClusterInstance',
      'moved',
      { kstatus: 'Current', argocd: 'Healthy' },
      'both namespaces of one project',
      ns,
    );

    // Deleted: the syncer's host identity goes with it (before the finalizer does).
    await deleteHeld('VirtualClusterInstance', 'dev', ns);
    await gone('VirtualClusterInstance', 'dev', 'the instance to be deleted', ns);
    const accounts = () =>
      api.request<{ items: Array<{ metadata: { labels: Record<string, string> } }> }>({
        method: 'GET',
        path: collectionPath(core('serviceaccounts'), ns),
        query: { labelSelector: INSTANCE_UID_LABEL },
      });
    const uidOf = async (name: string) => (await read('VirtualClusterInstance', name, ns)).metadata?.uid;
    const twinUid = await uidOf('twin');
    expect(
      (await accounts()).items.filter((sa) => sa.metadata.labels[INSTANCE_UID_LABEL] !== twinUid),
    ).toEqual([]);

    // The placement is free: twin syncs.
    const freed = await expectHealth(
      'VirtualClusterInstance',
      'twin',
      { kstatus: 'Current', argocd: 'Healthy' },
      'the placement freed',
      ns,
    );
    expect(conditionOf(freed, 'Syncing')).toMatchObject({ status: 'True', reason: 'Synced' });
    expect(conditionOf(freed, 'Stalled')).toBeUndefined();
    await api.request({ method: 'DELETE', path: objectPath(kinds.VirtualClusterInstance, ns, 'twin') });
    await gone('VirtualClusterInstance', 'twin', 'twin to be deleted', ns);
    expect((await accounts()).items).toEqual([]);
  });
});
