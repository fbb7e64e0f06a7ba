import { decodeJwt } from 'jose';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 6 of issue 16: direct tokens and kubeconfig keys were not capped at the caller key's
 * expiry, a token-mode kubeconfig without `certificateTTL` minted a key that never expired, and a
 * requested scope with `*` inside a name (`x*`) widened a token's audience to the whole platform.
 * Here alice's key ends in 15 minutes; everything she mints ends no later.
 */
describe('security: minted credentials end no later than the key that minted them', () => {
  const env = useGatewayEnv({ https: true, controllers: ['sharedsecret', 'project'] });
  const alice = uniqueName('alice');
  let shortLived: string;
  let unlimited: string;
  const TTL = 900;

  beforeAll(async () => {
    unlimited = await env().user(alice);
    shortLived = await env().key({ user: alice, ttl: TTL });
    await env().accepted(shortLived);
    // alice owns the project `web`: project admins may retrieve kubeconfigs (the aggregated rule
    // is set here: this apiserver runs no kube-controller-manager).
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles/platform-project-admin',
      contentType: 'application/merge-patch+json',
      body: {
        rules: [
          { apiGroups: [API_GROUP], resources: ['virtualclusterinstances/kubeconfig'], verbs: ['create'] },
        ],
      },
    });
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: 'web' },
        spec: { owner: { user: alice } },
      },
    });
    await eventually(
      async () =>
        (await env()
          .core.readNamespace({ name: 'p-web' })
          .catch(() => undefined)) !== undefined,
      30_000,
      'the project namespace',
    );
    await env().custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace: 'p-web',
      plural: 'virtualclusterinstances',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'VirtualClusterInstance',
        metadata: { name: 'dev' },
        spec: { accessPoint: { ingress: { enabled: true } }, endpoint: 'https://dev.example.com' },
      },
    });
  });

  const post = (path: string, token: string, body: unknown) =>
    call(`${env().api}/${path}`, {
      method: 'POST',
      token,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  const expiresIn = async (token: string) => {
    const result = await env().gateway.authenticator.authenticate(token);
    if (!result.ok) throw new Error('not a valid key');
    return (result.identity.accessKey.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY) - Date.now();
  };
  const kubeconfigKey = async (token: string, spec: Record<string, unknown>) => {
    const answer = await post('namespaces/p-web/virtualclusterinstances/dev/kubeconfig', token, { spec });
    expect(answer.status, answer.text).toBe(201);
    const key: string = parseYaml(answer.json.status.kubeConfig).users[0].user.token;
    await env()
      .accepted(key)
      .catch(() => {});
    return key;
  };

  test('a direct token asked for an hour ends with the key', async () => {
    const answer = await post('directclusterendpointtokens', shortLived, { spec: { ttl: 3600 } });
    expect(answer.status, answer.text).toBe(201);
    const { exp } = decodeJwt(answer.json.status.token);
    expect(exp! * 1000).toBeLessThanOrEqual(Date.now() + TTL * 1000);
  });

  test('a kubeconfig key ends with the key; without certificateTTL it lives a day, never forever', async () => {
    const capped = await kubeconfigKey(shortLived, { certificateTTL: 86_400 * 30 });
    expect(await expiresIn(capped)).toBeLessThanOrEqual(TTL * 1000);
    const byDefault = await kubeconfigKey(unlimited, {});
    const left = await expiresIn(byDefault);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(86_400 * 1000);
    const zero = await kubeconfigKey(unlimited, { certificateTTL: 0 });
    expect(await expiresIn(zero)).toBeLessThanOrEqual(86_400 * 1000);
  });

  test('a key made for oneself ends with the key that made it', async () => {
    const answer = await post('ownedaccesskeys', shortLived, { spec: { displayName: 'forever?' } });
    expect(answer.status, answer.text).toBe(201);
    expect(answer.headers.get('warning')).toContain('no later than the key that created it');
    expect(await expiresIn(answer.json.spec.key)).toBeLessThanOrEqual(TTL * 1000);
  });

  test('a wildcard inside a requested name is refused, not widened to the whole platform', async () => {
    for (const scope of [
      { clusters: [{ cluster: 'x*' }] },
      { virtualClusters: [{ project: 'web', virtualCluster: 'd*' }] },
      { projects: [{ project: 'w*' }] },
    ]) {
      const token = await post('directclusterendpointtokens', unlimited, { spec: { scope } });
      expect(token.status, token.text).toBe(403);
      const key = await post('ownedaccesskeys', unlimited, { spec: { scope } });
      expect(key.status, key.text).toBe(422);
    }
  });
});
