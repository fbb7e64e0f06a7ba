import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Cluster as ConnectedCluster } from '../../src/api/cluster.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { Condition } from '../../src/runtime/conditions.ts';
import { isNotFound } from '../../src/runtime/errors.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { hostKubeConfig, uniqueName, useExtraClusters, useNamespace } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { useOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';

const CLUSTERS = `/apis/${API_GROUP}/${API_VERSION}/clusters`;
const b64 = (s: string) => Buffer.from(s).toString('base64');

/**
 * The `cluster` controller reports whether the platform reaches each connected Cluster (`Ready`).
 * The connected cluster is a second apiserver; its credentials are a Secret in a namespace of
 * the host. Clusters are cluster-scoped and the host is shared by parallel test files: every
 * Cluster here has a unique name, and only those are looked at.
 */
describe('the operator reports whether a connected Cluster is reachable', () => {
  const namespace = useNamespace('clusters');
  const startCluster = useExtraClusters();
  const host = new KubeClient(hostKubeConfig());
  let connected: Cluster;
  const created: string[] = [];
  beforeAll(async () => {
    await installCrds(hostKubeConfig());
    connected = await startCluster({ name: uniqueName('connected') });
  });
  useOperator(namespace, { controllers: ['cluster'] });
  afterAll(async () => {
    for (const name of created) await deleteCluster(name).catch(() => {});
    host.close();
  });

  const createSecret = (name: string, data: Record<string, string>) =>
    host.request({
      method: 'POST',
      path: `/api/v1/namespaces/${namespace()}/secrets`,
      body: { metadata: { name }, data },
    });
  const patchSecret = (name: string, data: Record<string, string>) =>
    host.request({
      method: 'PATCH',
      path: `/api/v1/namespaces/${namespace()}/secrets/${name}`,
      body: { data },
      contentType: 'application/merge-patch+json',
    });
  /** A Cluster named `<prefix>-<random>` reaching the connected apiserver unless `spec` says otherwise. */
  const createCluster = async (prefix: string, spec: Partial<ConnectedCluster['spec']>) => {
    const name = uniqueName(prefix);
    created.push(name);
    await host.request({
      method: 'POST',
      path: CLUSTERS,
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'Cluster',
        metadata: { name },
        spec: { endpoint: connected.server, caData: b64(connected.caPem), ...spec },
      },
    });
    return name;
  };
  const readCluster = (name: string) =>
    host.request<ConnectedCluster>({ method: 'GET', path: `${CLUSTERS}/${name}` });
  const deleteCluster = (name: string) => host.request({ method: 'DELETE', path: `${CLUSTERS}/${name}` });
  const credentials = (name: string) => ({ name, namespace: namespace() });
  /** Polls until Ready holds `check`; returns the Cluster then (the last one seen on timeout, in the error). */
  const waitReady = async (
    name: string,
    check: (ready: Condition, cluster: ConnectedCluster) => boolean,
    what: string,
  ) => {
    let last: ConnectedCluster | undefined;
    await eventually(
      async () => {
        last = await readCluster(name);
        const ready = (last.status?.conditions ?? []).find((c) => c.type === 'Ready') as
          | Condition
          | undefined;
        return ready !== undefined && check(ready, last);
      },
      60_000,
      `${name}: ${what}`,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last status: ${JSON.stringify(last?.status)}`);
    });
    const cluster = last!;
    return { cluster, ready: cluster.status!.conditions!.find((c) => c.type === 'Ready')! };
  };

  test('working credentials: Ready=True, Reachable, for the current generation; deleting needs no finalizer', async () => {
    await createSecret('good', { token: b64(connected.adminToken) });
    const name = await createCluster('reachable', { credentialsSecretRef: credentials('good') });
    const first = await waitReady(name, (c) => c.status === 'True', 'Ready=True');
    expect(first.ready).toMatchObject({ reason: 'Reachable', observedGeneration: 1 });
    expect(first.ready.message).toContain("the platform reaches the cluster's API");
    expect(first.cluster.metadata.finalizers ?? []).toEqual([]);

    // A spec change is observed: observedGeneration follows metadata.generation.
    await host.request({
      method: 'PATCH',
      path: `${CLUSTERS}/${name}`,
      body: { spec: { displayName: 'Connected' } },
      contentType: 'application/merge-patch+json',
    });
    const second = await waitReady(
      name,
      (c, cluster) => c.observedGeneration === cluster.metadata.generation && c.observedGeneration === 2,
      'observedGeneration 2',
    );
    expect(second.ready).toMatchObject({ status: 'True', reason: 'Reachable' });
    // The flip time stays: only the status flip moves lastTransitionTime.
    expect(second.ready.lastTransitionTime).toBe(first.ready.lastTransitionTime);

    await deleteCluster(name);
    await eventually(async () => readCluster(name).then(() => false, isNotFound), 30_000, `${name} deleted`);
  });

  test('no credentialsSecretRef: Stalled (nothing changes that but the spec), Ready=False, CredentialsNotConfigured', async () => {
    const name = await createCluster('nocreds', {});
    const { cluster, ready } = await waitReady(
      name,
      (c) => c.reason === 'CredentialsNotConfigured',
      'CredentialsNotConfigured',
    );
    expect(ready).toMatchObject({ status: 'False', observedGeneration: 1 });
    expect(ready.message).toContain('spec.credentialsSecretRef');
    const stalled = cluster.status?.conditions?.find((c) => c.type === 'Stalled');
    expect(stalled).toMatchObject({
      status: 'True',
      reason: 'CredentialsNotConfigured',
      observedGeneration: 1,
    });
    expect(cluster.status?.observedGeneration).toBe(1);
  });

  test('a kubeconfig that would read a local file: Ready=False, InvalidCredentials, without quoting it', async () => {
    const hostile = [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${connected.server}"}}]`,
      'users: [{name: u, user: {token-file: /var/run/secrets/kubernetes.io/serviceaccount/token}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');
    await createSecret('hostile', { kubeconfig: b64(hostile) });
    const name = await createCluster('invalid', { credentialsSecretRef: credentials('hostile') });
    const { ready } = await waitReady(name, (c) => c.reason === 'InvalidCredentials', 'InvalidCredentials');
    expect(ready.status).toBe('False');
    expect(ready.message).toContain('token-file');
    expect(ready.message).not.toContain('/var/run/secrets');
  });

  test('an endpoint nothing listens on: Ready=False, Unreachable', async () => {
    await createSecret('for-nowhere', { token: b64(connected.adminToken) });
    const name = await createCluster('unreachable', {
      endpoint: 'https://127.0.0.1:1',
      credentialsSecretRef: credentials('for-nowhere'),
    });
    const { ready } = await waitReady(name, (c) => c.reason === 'Unreachable', 'Unreachable');
    expect(ready).toMatchObject({ status: 'False', observedGeneration: 1 });
    expect(ready.message).toContain('https://127.0.0.1:1');
  });

  test('a wrong token: Ready=False, Unauthorized, not rewritten on retries; fixing the Secret flips it to True', async () => {
    await createSecret('wrong', { token: b64('not-a-valid-token') });
    const name = await createCluster('unauthorized', { credentialsSecretRef: credentials('wrong') });
    const { cluster, ready } = await waitReady(name, (c) => c.reason === 'Unauthorized', 'Unauthorized');
    expect(ready).toMatchObject({ status: 'False', observedGeneration: 1 });
    expect(ready.message).toContain('401');
    expect(ready.message).not.toContain('not-a-valid-token');

    // The controller probes again every 10 s; an unchanged answer writes nothing.
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    expect((await readCluster(name)).metadata.resourceVersion).toBe(cluster.metadata.resourceVersion);

    // The Secret is not watched: the next retry (within 10 s) picks the fixed token up.
    const fixedAt = Date.now();
    await patchSecret('wrong', { token: b64(connected.adminToken) });
    const fixed = await waitReady(name, (c) => c.status === 'True', 'Ready=True after the fix');
    process.stdout.write(`cluster Ready: True ${Date.now() - fixedAt} ms after the Secret was fixed\n`);
    expect(fixed.ready.reason).toBe('Reachable');
    expect(Date.parse(fixed.ready.lastTransitionTime)).toBeGreaterThan(Date.parse(ready.lastTransitionTime));
  });
});
