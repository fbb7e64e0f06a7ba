import { Agent } from 'undici';
import { describe, expect, test } from 'vitest';
import { ACCESS_KEY_EXTRA } from '../../src/identity/groups.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { PROXY_IDENTITY, rawRequest, useAccessProxyEnv } from '../support/access-proxy.ts';
import { kubeConfigFor } from '../support/cluster.ts';

/**
 * The one ClusterRole and binding a target needs (docs/access-proxy.md): with it the platform's
 * identity may act as a person (user, groups, the access-key extra) and do nothing as itself.
 */
describe('access proxy: the target RBAC the platform needs', () => {
  const env = useAccessProxyEnv();

  test('the platform identity impersonates a person on the target and has no rights of its own', async () => {
    const { connected } = env();
    // A second token for the identity the credentials Secret holds (prepareTarget made it once).
    const admin = new KubeClient(kubeConfigFor(connected));
    const { status } = await admin.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${PROXY_IDENTITY.namespace}/serviceaccounts/${PROXY_IDENTITY.name}/token`,
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} },
    });
    admin.close();
    const agent = new Agent({ connect: { ca: connected.caPem } });
    const asPlatform = (path: string, headers: Record<string, string> = {}) =>
      rawRequest(`${connected.server}${path}`, agent, {
        method: 'POST',
        headers: { authorization: `Bearer ${status.token}`, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      });
    const own = await asPlatform('/apis/authentication.k8s.io/v1/selfsubjectreviews');
    expect(own.json.status.userInfo.username).toBe(
      `system:serviceaccount:${PROXY_IDENTITY.namespace}:${PROXY_IDENTITY.name}`,
    );
    const impersonated = await asPlatform('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      'impersonate-user': 'alice',
      'impersonate-group': 'platform:user:alice',
      [`impersonate-extra-${encodeURIComponent(ACCESS_KEY_EXTRA)}`]: 'key-1',
    });
    expect(impersonated.status).toBe(201);
    expect(impersonated.json.status.userInfo).toMatchObject({
      username: 'alice',
      groups: expect.arrayContaining(['platform:user:alice']),
      extra: { [ACCESS_KEY_EXTRA]: ['key-1'] },
    });
    // As itself the identity reads nothing, not even namespaces.
    const list = await rawRequest(`${connected.server}/api/v1/namespaces`, agent, {
      headers: { authorization: `Bearer ${status.token}` },
    });
    expect(list.status).toBe(403);
    // Other extras are not covered by the role.
    const otherExtra = await asPlatform('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      'impersonate-user': 'alice',
      'impersonate-extra-scopes': 'x',
    });
    expect(otherExtra.status).toBe(403);
    await agent.close();
  });
});
