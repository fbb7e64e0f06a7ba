import { ApiException } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { StatusError } from '../../api/status.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { provisionedInstanceConnection } from './kubeconfig-connection.ts';

const KEY = '-----BEGIN PRIVATE KEY-----\nsecret-material\n-----END PRIVATE KEY-----';
const b64 = (text: string) => Buffer.from(text).toString('base64');
const kubeconfig = (user: string) =>
  [
    'apiVersion: v1',
    'kind: Config',
    'current-context: c',
    'contexts: [{name: c, context: {cluster: c, user: u}}]',
    'clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority-data: Q0E=}}]',
    `users: [{name: u, user: ${user}}]`,
  ].join('\n');

/** A host apiserver that answers one Secret read: 404 when `data` is null. */
const hostWith = (data: Record<string, string> | null): KubeApi =>
  ({
    request: async (options: { path: string }) => {
      expect(options.path).toBe('/api/v1/namespaces/p-web/secrets/vc-dev-admin');
      if (data === null) throw new ApiException(404, 'not found', {}, {});
      return { data };
    },
  }) as unknown as KubeApi;

const request = { namespace: 'p-web', name: 'dev' };

describe('provisionedInstanceConnection', () => {
  test('the admin kubeconfig is the connection', async () => {
    const connection = await provisionedInstanceConnection(
      { api: hostWith({ kubeconfig: b64(kubeconfig(`{client-key-data: ${b64(KEY)}}`)) }) },
      request,
    );
    expect(connection.server).toBe('https://127.0.0.1:6443');
    expect(connection.caData).toBe('Q0E=');
  });

  test('no admin Secret yet: 503, not provisioned', async () => {
    const failure = await provisionedInstanceConnection({ api: hostWith(null) }, request).catch((e) => e);
    expect(failure).toBeInstanceOf(StatusError);
    expect(failure.code).toBe(503);
    expect(failure.message).toBe(
      'virtual cluster p-web/dev is not provisioned yet: the platform has not made its control plane',
    );
  });

  test('an admin kubeconfig that would read a file: 503 naming why, never its content', async () => {
    const failure = await provisionedInstanceConnection(
      {
        api: hostWith({
          kubeconfig: b64(kubeconfig(`{token-file: /var/run/secrets/token, password: secret-material}`)),
        }),
      },
      request,
    ).catch((e) => e);
    expect(failure.code).toBe(503);
    expect(failure.message).toContain('token-file');
    expect(failure.message).not.toContain('secret-material');
  });
});
