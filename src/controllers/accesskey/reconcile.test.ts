import { describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { decideKeyLifecycle, keyReadyCondition } from './reconcile.ts';

const created = '2026-01-01T00:00:00Z';
const at = (seconds: number) => new Date(Date.parse(created) + seconds * 1000);
const key = (
  spec: Partial<OwnedAccessKey['spec']>,
  status: OwnedAccessKey['status'] = {},
): OwnedAccessKey => ({
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name: 'k', creationTimestamp: created, generation: 2 },
  spec: { user: 'alice', type: 'User', ...spec },
  status,
});

describe('decideKeyLifecycle', () => {
  test.each([
    ['no ttl, no limits: kept, never rechecked', key({}), {}, 100, { action: 'keep', expiry: null }],
    [
      'ttl not reached: kept, rechecked exactly at the deadline',
      key({ ttl: 10 }),
      {},
      4,
      { action: 'keep', expiry: at(10), recheckInMs: 6000 },
    ],
    [
      'ttl reached (the deadline itself is too late): deleted',
      key({ ttl: 10 }),
      {},
      10,
      { action: 'delete', expiry: at(10) },
    ],
    [
      'expired but disabled: kept',
      key({ ttl: 10, disabled: true }),
      {},
      11,
      { action: 'keep', expiry: at(10) },
    ],
    [
      'the global maximum caps a longer ttl',
      key({ ttl: 100 }),
      { accessKeyMaxTTLSeconds: 5 },
      5,
      { action: 'delete', expiry: at(5) },
    ],
    [
      'the global maximum applies without a ttl',
      key({}),
      { accessKeyMaxTTLSeconds: 5 },
      1,
      { action: 'keep', expiry: at(5), recheckInMs: 4000 },
    ],
    [
      'activity extends a ttlAfterLastActivity key',
      key({ ttl: 10, ttlAfterLastActivity: true }, { lastActivity: '2026-01-01T00:00:30Z' }),
      {},
      35,
      { action: 'keep', expiry: at(40), recheckInMs: 5000 },
    ],
    [
      'a Login key without ttl gets the login ttl',
      key({ type: 'Login' }),
      { loginAccessKeyTTLSeconds: 60 },
      60,
      { action: 'delete', expiry: at(60) },
    ],
  ] as const)('%s', (_, k, limits, now, expected) => {
    expect(decideKeyLifecycle(k, limits, at(now))).toEqual(expected);
  });

  test('a key with a limit but no creation time is deleted (fail closed)', () => {
    const broken = key({ ttl: 10 });
    broken.metadata.creationTimestamp = undefined;
    expect(decideKeyLifecycle(broken, {}, at(0)).action).toBe('delete');
  });
});

describe('keyReadyCondition', () => {
  const ready = (k: OwnedAccessKey, limits: Parameters<typeof decideKeyLifecycle>[1], now: number) =>
    keyReadyCondition(k, decideKeyLifecycle(k, limits, at(now)));

  test.each([
    [
      'no limit: Active, does not expire',
      key({}),
      {},
      100,
      { status: 'True', reason: 'Active', message: 'the key is active and does not expire' },
    ],
    [
      'before its deadline: Active, until when',
      key({ ttl: 10 }),
      {},
      4,
      { status: 'True', reason: 'Active', message: 'the key is active until 2026-01-01T00:00:10.000Z' },
    ],
    [
      'the global maximum is the deadline shown',
      key({ ttl: 100 }),
      { accessKeyMaxTTLSeconds: 5 },
      1,
      { status: 'True', reason: 'Active', message: 'the key is active until 2026-01-01T00:00:05.000Z' },
    ],
    [
      'disabled: Disabled',
      key({ disabled: true }),
      {},
      1,
      {
        status: 'True',
        reason: 'Disabled',
        message: 'the key is disabled (spec.disabled) and authenticates nothing',
      },
    ],
    [
      'disabled past its deadline (kept): still Disabled',
      key({ ttl: 10, disabled: true }),
      {},
      11,
      { status: 'True', reason: 'Disabled' },
    ],
    [
      'past its deadline (being deleted): Expired, since when',
      key({ ttl: 10 }),
      {},
      10,
      {
        status: 'False',
        reason: 'Expired',
        message: 'the key expired at 2026-01-01T00:00:10.000Z and is being deleted',
      },
    ],
  ] as const)('%s', (_, k, limits, now, expected) => {
    expect(ready(k, limits, now)).toMatchObject({ type: 'Ready', observedGeneration: 2, ...expected });
  });

  test('a limit without a creation time counts as expired', () => {
    const broken = key({ ttl: 10 });
    broken.metadata.creationTimestamp = undefined;
    expect(ready(broken, {}, 0)).toMatchObject({ status: 'False', reason: 'Expired' });
  });

  test('the condition does not change with time while the key is kept (no status write per reconcile)', () => {
    for (const [k, limits] of [
      [key({}), {}],
      [key({ ttl: 3600 }), {}],
      [key({ ttl: 10, ttlAfterLastActivity: true }, { lastActivity: '2026-01-01T00:00:30Z' }), {}],
      [key({ ttl: 10, disabled: true }), {}],
    ] as const) {
      expect(ready(k, limits, 1)).toEqual(ready(k, limits, 2));
    }
    // A disabled key is the same before and after its deadline.
    const disabled = key({ ttl: 10, disabled: true });
    expect(ready(disabled, {}, 5)).toEqual(ready(disabled, {}, 500));
  });

  test('a key without a generation has no observedGeneration', () => {
    const k = key({});
    k.metadata.generation = undefined;
    expect(ready(k, {}, 0)).not.toHaveProperty('observedGeneration');
  });
});
