import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeApi, RequestOptions } from '../runtime/kube-api.ts';
import { renderSecrets } from './in-cluster-render.ts';
import { deleteSecret, readSecretText, writeSecretText } from './instance-secrets.ts';
import type { SecretText } from './pki.ts';

/** A KubeApi over one stored Secret (or none), recording every request. */
function secretApi(stored: { data: Record<string, string>; resourceVersion: string } | undefined) {
  const requests: RequestOptions[] = [];
  const api: KubeApi = {
    request: async <T>(options: RequestOptions): Promise<T> => {
      requests.push(options);
      if (options.method === 'GET' || options.method === 'DELETE') {
        if (!stored) throw new ApiException(404, 'NotFound', { reason: 'NotFound' }, {});
        return {
          metadata: { name: 'vc-dev-admin', namespace: 'p', resourceVersion: stored.resourceVersion },
          data: stored.data,
        } as T;
      }
      return {} as T;
    },
    watch: () => Promise.reject(new Error('no watch here')),
  };
  return { api, requests };
}
const b64 = (text: string) => Buffer.from(text).toString('base64');
const instance = { namespace: 'p', name: 'dev', uid: 'uid-1' };

describe('instance Secrets', () => {
  it('reads the data as text, and a missing Secret as undefined', async () => {
    expect(
      await readSecretText(secretApi({ data: { a: b64('x') }, resourceVersion: '1' }).api, 'p', 's'),
    ).toEqual({
      a: 'x',
    });
    expect(await readSecretText(secretApi(undefined).api, 'p', 's')).toBeUndefined();
  });

  it('creates a missing Secret owned by the instance', async () => {
    const { api, requests } = secretApi(undefined);
    await writeSecretText(api, instance, 'vc-dev-admin', { a: 'x' });
    const create = requests.find((r) => r.method === 'POST');
    expect(create?.path).toBe('/api/v1/namespaces/p/secrets');
    expect(create?.body).toMatchObject({
      data: { a: b64('x') },
      metadata: {
        name: 'vc-dev-admin',
        labels: { 'app.kubernetes.io/managed-by': 'cluster-platform' },
        ownerReferences: [{ kind: 'VirtualClusterInstance', name: 'dev', uid: 'uid-1' }],
      },
    });
  });

  it("labels the Secret as the in-cluster provisioner labels the same instance's objects", async () => {
    const { api, requests } = secretApi(undefined);
    await writeSecretText(api, instance, 'vc-dev-admin', { a: 'x' });
    const written = requests.find((r) => r.method === 'POST')?.body as { metadata: { labels: unknown } };
    const rendered = renderSecrets(instance, { pki: {}, admin: {} });
    expect(written.metadata.labels).toEqual(rendered.admin.metadata?.labels);
    expect(written.metadata.labels).toEqual({
      'app.kubernetes.io/name': 'virtual-control-plane',
      'app.kubernetes.io/instance': 'dev',
      'app.kubernetes.io/component': 'control-plane',
      'app.kubernetes.io/managed-by': 'cluster-platform',
    });
  });

  it('writes nothing when the data are the same, and replaces them at the read version when not', async () => {
    const same = secretApi({ data: { a: b64('x') }, resourceVersion: '7' });
    await writeSecretText(same.api, instance, 'vc-dev-admin', { a: 'x' });
    expect(same.requests.map((r) => r.method)).toEqual(['GET']);

    const texts: SecretText[] = [{ a: 'y' }, { a: 'x', b: 'z' }, {}];
    for (const text of texts) {
      const changed = secretApi({ data: { a: b64('x') }, resourceVersion: '7' });
      await writeSecretText(changed.api, instance, 'vc-dev-admin', text);
      expect(changed.requests.map((r) => r.method)).toEqual(['GET', 'PUT']);
      expect(changed.requests[1]?.body).toMatchObject({ metadata: { resourceVersion: '7' } });
      // The new data whole: a key removed is gone, not kept from the read Secret.
      expect((changed.requests[1]!.body as { data: unknown }).data).toEqual(
        Object.fromEntries(Object.entries(text).map(([key, value]) => [key, b64(value)])),
      );
    }
  });

  it('deletes, and a Secret already gone is fine', async () => {
    await deleteSecret(secretApi(undefined).api, 'p', 's');
    const { api, requests } = secretApi({ data: {}, resourceVersion: '1' });
    await deleteSecret(api, 'p', 's');
    expect(requests).toEqual([{ method: 'DELETE', path: '/api/v1/namespaces/p/secrets/s' }]);
  });
});
