import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import type { SyncerStatus } from '../../sync/controllers/syncer.ts';
import {
  CredentialsMissing,
  connectionFor,
  connectionFromKubeconfig,
  InvalidCredentials,
  kubeConfigOptions,
  placementOf,
  syncerFingerprint,
  syncingCondition,
} from './desired.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const vci = (spec: Record<string, unknown> = {}) => ({
  metadata: { name: 'dev', namespace: 'p-team' },
  spec: { endpoint: 'https://vc.example:6443', caData: b64('PEM'), ...spec },
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

describe('placementOf', () => {
  it('clusterRef wins, else the instance itself', () => {
    expect(placementOf(vci())).toEqual({ hostNamespace: 'p-team', vclusterName: 'dev' });
    expect(
      placementOf(
        vci({ clusterRef: { cluster: 'c', namespace: 'vc-host', virtualCluster: 'vc1' } }) as never,
      ),
    ).toEqual({ hostNamespace: 'vc-host', vclusterName: 'vc1' });
  });
});

describe('connectionFor', () => {
  it('a token uses spec.endpoint and spec.caData', () => {
    expect(connectionFor(vci(), 'creds', { token: b64('t0k3n\n') })).toEqual({
      server: 'https://vc.example:6443',
      caData: b64('PEM'),
      token: 't0k3n',
    });
  });

  it('a kubeconfig is used as it is, inline credentials only', () => {
    const text = kubeconfig({ token: 'abc' });
    expect(connectionFor(vci(), 'creds', { kubeconfig: b64(text), token: b64('ignored') })).toEqual({
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
    expect(() => connectionFor(vci(), 'creds', { kubeconfig: b64(text) })).toThrow(InvalidCredentials);
    expect(() => connectionFromKubeconfig(text)).toThrow(field);
  });

  it('missing pieces are CredentialsMissing, never quoting the credentials', () => {
    expect(() => connectionFor(vci(), 'creds', null)).toThrow(CredentialsMissing);
    expect(() => connectionFor(vci(), 'creds', { other: b64('x') })).toThrow(
      'Secret creds has neither a kubeconfig nor a token key',
    );
    expect(() =>
      connectionFor(vci({ endpoint: undefined }), 'creds', { token: b64('secret-token') }),
    ).toThrow(/spec.endpoint/);
    try {
      connectionFromKubeconfig('users: [');
    } catch (err) {
      expect(String(err)).not.toContain('users: [');
    }
    expect(() => connectionFromKubeconfig(stringify({ 'current-context': 'x' }))).toThrow(InvalidCredentials);
  });
});

describe('syncerFingerprint', () => {
  it('changes with any input and does not contain the token', () => {
    const base = {
      connection: { server: 's', token: 'very-secret' },
      config: 'a: 1',
      hostNamespace: 'n',
      vclusterName: 'v',
    };
    const fp = syncerFingerprint(base);
    expect(fp).not.toContain('very-secret');
    expect(syncerFingerprint({ ...base })).toBe(fp);
    expect(syncerFingerprint({ ...base, connection: { server: 's', token: 'rotated' } })).not.toBe(fp);
    expect(syncerFingerprint({ ...base, config: 'a: 2' })).not.toBe(fp);
  });
});

describe('syncingCondition', () => {
  const status = (over: Partial<SyncerStatus> = {}): SyncerStatus => ({
    ready: true,
    stopped: false,
    kinds: ['Service', 'Endpoints'],
    waitingFor: [],
    failing: [],
    ...over,
  });

  it('maps every state to one condition', () => {
    expect(syncingCondition({ phase: 'notConfigured' }, 1)).toBeNull();
    expect(syncingCondition({ phase: 'invalidConfig', errors: ['a: b'] }, 2)).toEqual({
      type: 'Syncing',
      status: 'False',
      reason: 'InvalidConfig',
      message: 'spec.config: a: b',
      observedGeneration: 2,
    });
    expect(
      syncingCondition({ phase: 'noConnection', reason: 'Unreachable', message: 'down' }, 1),
    ).toMatchObject({ status: 'False', reason: 'Unreachable' });
    expect(
      syncingCondition(
        { phase: 'running', status: status({ ready: false, waitingFor: ['virtual services'] }) },
        1,
      ),
    ).toMatchObject({
      status: 'Unknown',
      reason: 'Starting',
      message: 'waiting for the caches: virtual services',
    });
    expect(syncingCondition({ phase: 'running', status: status() }, 1)).toMatchObject({
      status: 'True',
      reason: 'Synced',
      message: 'syncing Service, Endpoints',
    });
  });

  it('lists a few failing objects, clipped', () => {
    const failing = Array.from({ length: 7 }, (_, i) => ({
      kind: 'Endpoints' as const,
      key: `default/e${i}`,
      reason: 'ExpressionTimeout',
      message: `sync.toHost.endpoints.patches[0].expression: took longer than 50ms ${'x'.repeat(i === 0 ? 400 : 0)}`,
    }));
    const condition = syncingCondition({ phase: 'running', status: status({ failing }) }, 3)!;
    expect(condition).toMatchObject({ status: 'False', reason: 'SyncError', observedGeneration: 3 });
    expect(condition.message).toMatch(/^7 object\(s\) failed to sync: Endpoints default\/e0: /);
    expect(condition.message).toContain('(and 2 more)');
    expect(condition.message).not.toContain('e5');
    expect(condition.message.length).toBeLessThan(2000);
  });
});
