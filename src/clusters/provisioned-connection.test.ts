import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ADMIN_KEYS } from '../provision/control-plane.ts';
import { ensureInstancePki } from '../provision/pki.ts';
import { CredentialsMissing, InvalidCredentials } from './connection.ts';
import { provisionedAdminSecretName, provisionedConnection } from './provisioned-connection.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const encode = (text: Record<string, string>) =>
  Object.fromEntries(Object.entries(text).map(([k, v]) => [k, b64(v)]));

describe('provisionedConnection', () => {
  it('reads the admin Secret the provisioner writes: its server, CA and client certificate', async () => {
    const instance = {
      namespace: 'p-team',
      name: 'dev',
      endpoint: 'https://127.0.0.1:40001',
      apiServerPort: 40001,
    };
    const { admin } = await ensureInstancePki({ pki: undefined, admin: undefined }, instance);
    expect(provisionedAdminSecretName('dev')).toBe('vc-dev-admin');
    const connection = provisionedConnection('dev', encode(admin));
    expect(connection).toEqual({
      server: 'https://127.0.0.1:40001',
      caData: b64(admin[ADMIN_KEYS.caCert]!),
      certData: b64(admin[ADMIN_KEYS.clientCert]!),
      keyData: b64(admin[ADMIN_KEYS.clientKey]!),
    });
  });

  it('a missing Secret or kubeconfig key is CredentialsMissing naming the Secret', () => {
    expect(() => provisionedConnection('dev', null)).toThrow(CredentialsMissing);
    expect(() => provisionedConnection('dev', null)).toThrow('Secret vc-dev-admin does not exist');
    expect(() => provisionedConnection('dev', { [ADMIN_KEYS.caCert]: b64('CA') })).toThrow(
      'Secret vc-dev-admin has no kubeconfig key',
    );
    expect(() => provisionedConnection('dev', { [ADMIN_KEYS.kubeconfig]: b64('  \n') })).toThrow(
      CredentialsMissing,
    );
  });

  it('a kubeconfig that is not inline credentials is InvalidCredentials, never quoting it', () => {
    const text = stringify({
      clusters: [{ name: 'c', cluster: { server: 'https://k:6443' } }],
      users: [{ name: 'u', user: { 'token-file': '/var/run/secrets/kubernetes.io/serviceaccount/token' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    expect(() => provisionedConnection('dev', { [ADMIN_KEYS.kubeconfig]: b64(text) })).toThrow(
      InvalidCredentials,
    );
    expect(() => provisionedConnection('dev', { [ADMIN_KEYS.kubeconfig]: b64('a: [') })).toThrow(
      InvalidCredentials,
    );
    expect(() => provisionedConnection('dev', { [ADMIN_KEYS.kubeconfig]: b64('a: [') })).not.toThrow('a: [');
  });
});
