import { describe, expect, it } from 'vitest';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import {
  DEFAULT_IDENTITY_REFRESH_INTERVAL_MS,
  RefreshFailed,
  refreshFailed,
  refreshSchedule,
} from './desired.ts';

const key = (spec: Partial<OwnedAccessKey['spec']>, metadata: Partial<OwnedAccessKey['metadata']> = {}) =>
  ({
    apiVersion: 'management.platform/v1',
    kind: 'OwnedAccessKey',
    metadata: { name: 'k', creationTimestamp: '2026-01-01T00:00:00Z', ...metadata },
    spec: { user: 'alice', type: 'Login', identity: { connector: 'corp' }, ...spec },
  }) as OwnedAccessKey;

const at = (iso: string) => Date.parse(iso);

/** A provider's failure, as sign-in would throw one. */
class ProviderLoginFailed extends Error {}

describe('when an identity is refreshed', () => {
  it('skips keys that are not single sign-on Login keys, disabled or going away', () => {
    for (const skipped of [
      key({ type: 'User' }),
      key({ identity: { connector: 'password' } }),
      key({ identity: undefined }),
      key({ disabled: true }),
      key({ user: undefined, team: 'devs' }),
      key({}, { deletionTimestamp: '2026-01-01T00:00:00Z' }),
    ])
      expect(refreshSchedule(skipped, 60_000, at('2026-01-02T00:00:00Z'))).toEqual({ action: 'skip' });
  });

  it('counts from the last refresh (or the creation) and waits the rest of the interval', () => {
    const now = at('2026-01-01T00:00:30Z');
    expect(refreshSchedule(key({ identityRefresh: '2026-01-01T00:00:00Z' }), 60_000, now)).toEqual({
      action: 'wait',
      inMs: 30_000,
    });
    expect(refreshSchedule(key({}), 20_000, now)).toEqual({ action: 'refresh' });
    expect(refreshSchedule(key({}, { creationTimestamp: undefined }), 20_000, now)).toEqual({
      action: 'refresh',
    });
  });

  it('by default (docs/login.md, what the controllers run with) is due 10 minutes after the last refresh', () => {
    const refreshed = key({ identityRefresh: '2026-01-01T00:00:00Z' });
    expect(
      refreshSchedule(refreshed, DEFAULT_IDENTITY_REFRESH_INTERVAL_MS, at('2026-01-01T00:09:59Z')),
    ).toEqual({
      action: 'wait',
      inMs: 1000,
    });
    expect(
      refreshSchedule(refreshed, DEFAULT_IDENTITY_REFRESH_INTERVAL_MS, at('2026-01-01T00:10:00Z')),
    ).toEqual({
      action: 'refresh',
    });
  });
});

describe('a refresh that failed for a while', () => {
  it('says only the class of what failed; the provider answer stays in the cause, for the log', () => {
    const cause = new ProviderLoginFailed('the provider answered {"error":"server_error","token":"s3cret"}');
    const failed = refreshFailed(cause);
    expect(failed).toBeInstanceOf(RefreshFailed);
    expect(failed.name).toBe('RefreshFailed');
    expect(failed.message).toBe(
      'the identity could not be refreshed (ProviderLoginFailed); it is tried again',
    );
    expect(failed.cause).toBe(cause);
    expect(refreshFailed(new TypeError('fetch failed')).message).toContain('(TypeError)');
  });
});
