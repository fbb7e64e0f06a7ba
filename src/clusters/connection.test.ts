import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  CredentialsMissing,
  connectionFor,
  connectionFromKubeconfig,
  InvalidCredentials,
  kubeConfigOptions,
} from './connection.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const target = (spec: Record<string, unknown> = {}) => ({
  endpoint: 'https://vc.example:6443',
  caData: b64('PEM'),
  ...spec,
});

const kubeconfig = (user: Record<string, unknown>, cluster: Record<string, unknown> = {}) =>
  stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'c',
        cluster: { server: 'https://k:6443', 'certificate-authority-data': b64('CA'), ...cluster },
      },
    ],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  });

describe('connectionFor', () => {
  it('a token uses spec.endpoint and spec.caData', () => {
    expect(connectionFor(target(), 'creds', { token: b64('t0k3n\n') })).toEqual({
      server: 'https://vc.example:6443',
      caData: b64('PEM'),
      token: 't0k3n',
    });
  });

  it('a kubeconfig is used as it is, inline credentials only', () => {
    const text = kubeconfig({ token: 'abc' });
    expect(connectionFor(target(), 'creds', { kubeconfig: b64(text), token: b64('ignored') })).toEqual({
      server: 'https://k:6443',
      caData: b64('CA'),
      token: 'abc',
    });
    const kc = new KubeConfig();
    kc.loadFromOptions(kubeConfigOptions(connectionFromKubeconfig(text)));
    expect(kc.getCurrentCluster()?.server).toBe('https://k:6443');
    expect(kc.getCurrentUser()?.token).toBe('abc');
  });

  it.each([
    [{ exec: { command: 'sh', apiVersion: 'client.authentication.k8s.io/v1' } }, {}, 'users[].user.exec'],
    [{ 'token-file': '/var/run/secrets/kubernetes.io/serviceaccount/token' }, {}, 'token-file'],
    [{ 'client-certificate': '/etc/cert', 'client-key': '/etc/key' }, {}, 'client-certificate'],
    [{ 'auth-provider': { name: 'oidc' } }, {}, 'auth-provider'],
    [{ token: 'x' }, { 'certificate-authority': '/etc/ca' }, 'certificate-authority'],
  ])('a kubeconfig that reads files or runs programs is refused: %j %j', (user, cluster, field) => {
    const text = kubeconfig(user, cluster);
    expect(() => connectionFor(target(), 'creds', { kubeconfig: b64(text) })).toThrow(InvalidCredentials);
    expect(() => connectionFromKubeconfig(text)).toThrow(field);
  });

  it('missing pieces are CredentialsMissing, never quoting the credentials', () => {
    expect(() => connectionFor(target(), 'creds', null)).toThrow(CredentialsMissing);
    expect(() => connectionFor(target(), 'creds', { other: b64('x') })).toThrow(
      'Secret creds has neither a kubeconfig nor a token key',
    );
    expect(() =>
      connectionFor(target({ endpoint: undefined }), 'creds', { token: b64('secret-token') }),
    ).toThrow(/spec.endpoint/);
    expect(() => connectionFromKubeconfig('users: [')).toThrow(InvalidCredentials);
    expect(() => connectionFromKubeconfig('users: [')).not.toThrow('users: [');
    expect(() => connectionFromKubeconfig(stringify({ 'current-context': 'x' }))).toThrow(InvalidCredentials);
  });
});
