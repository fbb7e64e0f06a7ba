import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AuthorizationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import { describe, expect, inject, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';
import {
  hostKubeConfig,
  kubeConfigFor,
  kubectl,
  uniqueName,
  useExtraClusters,
  useNamespace,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

const execFileAsync = promisify(execFile);

describe('the host control plane', () => {
  const namespace = useNamespace('foundation');
  const kc = hostKubeConfig();

  test('RBAC decides: a Role bound to a Group allows its members and nobody else', async () => {
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    const authz = kc.makeApiClient(AuthorizationV1Api);
    const ns = namespace();
    await rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'configmap-reader' },
        rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'readers' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'configmap-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:team:readers' }],
      },
    });
    const review = (user: string, groups: string[], verb: string) =>
      authz.createSubjectAccessReview({
        body: { spec: { user, groups, resourceAttributes: { namespace: ns, verb, resource: 'configmaps' } } },
      });

    expect((await review('alice', ['platform:team:readers'], 'get')).status?.allowed).toBe(true);
    expect((await review('alice', ['platform:team:readers'], 'delete')).status?.allowed).toBe(false);
    expect((await review('bob', ['platform:team:writers'], 'get')).status?.allowed).toBe(false);
  });

  test('kube-controller-manager garbage-collects a dependent when its owner is deleted', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const ns = namespace();
    const owner = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'owner' } },
    });
    const dependent: V1ConfigMap = {
      metadata: {
        name: 'dependent',
        ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid! }],
      },
    };
    await core.createNamespacedConfigMap({ namespace: ns, body: dependent });
    await core.deleteNamespacedConfigMap({ namespace: ns, name: 'owner' });

    await eventually(
      async () => {
        const list = await core.listNamespacedConfigMap({ namespace: ns });
        return !list.items.some((cm) => cm.metadata?.name === 'dependent');
      },
      60_000,
      'garbage collection of the dependent ConfigMap',
    );
  });

  test('kubectl of the same version talks to it', async () => {
    const result = await kubectl(['get', 'namespace', namespace(), '-o', 'jsonpath={.metadata.name}']);
    expect(result.stderr).toBe('');
    expect(result.stdout).toBe(namespace());
    const version = await kubectl(['version', '-o', 'json']);
    const parsed = JSON.parse(version.stdout) as {
      clientVersion: { gitVersion: string };
      serverVersion: { gitVersion: string };
    };
    expect(parsed.serverVersion.gitVersion).toBe(parsed.clientVersion.gitVersion);
  });

  test('`platform controlplane build` prints the path of the cached binary this run uses (README, Commands)', async () => {
    const build = await execFileAsync(join(repoRoot, 'bin', 'platform.js'), ['controlplane', 'build'], {
      cwd: repoRoot,
    });
    expect(build.stdout).toBe(`${inject('controlPlaneBinary')}\n`);
  });
});

describe('a second apiserver on the same etcd under another prefix', () => {
  const startCluster = useExtraClusters();
  const namespace = useNamespace('isolation');

  test('sees none of the first cluster objects, and the first sees none of its', async () => {
    const second = await startCluster({ name: uniqueName('second') });
    const firstCore = hostKubeConfig().makeApiClient(CoreV1Api);
    const secondCore = kubeConfigFor(second).makeApiClient(CoreV1Api);

    await firstCore.createNamespacedConfigMap({
      namespace: namespace(),
      body: { metadata: { name: 'only-in-first' } },
    });
    const secondNamespaces = (await secondCore.listNamespace()).items.map((n) => n.metadata?.name);
    expect(secondNamespaces).not.toContain(namespace());
    const secondConfigMaps = await secondCore.listConfigMapForAllNamespaces();
    expect(secondConfigMaps.items.map((c) => c.metadata?.name)).not.toContain('only-in-first');

    const onlyInSecond = uniqueName('only-in-second');
    await secondCore.createNamespace({ body: { metadata: { name: onlyInSecond } } });
    const firstNamespaces = (await firstCore.listNamespace()).items.map((n) => n.metadata?.name);
    expect(firstNamespaces).not.toContain(onlyInSecond);
    expect((await secondCore.readNamespace({ name: onlyInSecond })).metadata?.name).toBe(onlyInSecond);
  });
});
