import { describe, expect, it } from 'vitest';
import type { SyncerStatus } from '../../sync/controllers/syncer.ts';
import { placementOf, syncerFingerprint, syncingCondition } from './desired.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const vci = (spec: Record<string, unknown> = {}) => ({
  metadata: { name: 'dev', namespace: 'p-team' },
  spec: { endpoint: 'https://vc.example:6443', caData: b64('PEM'), ...spec },
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
