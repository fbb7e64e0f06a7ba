import { describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { decideKeyLifecycle } from './reconcile.ts';

const created = '2026-01-01T00:00:00Z';
const at = (seconds: number) => new Date(Date.parse(created) + seconds * 1000);
const key = (
  spec: Partial<OwnedAccessKey['spec']>,
  status: OwnedAccessKey['status'] = {},
): OwnedAccessKey => ({
  apiVersion: 'management.platform/v1',
  kind: 'OwnedAccessKey',
  metadata: { name: 'k', creationTimestamp: created },
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
