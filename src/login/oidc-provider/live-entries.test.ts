import { describe, expect, it } from 'vitest';
import { LiveEntries } from './live-entries.ts';
import { ENTRIES_PER_MODEL } from './secret-models.ts';

describe('live entries per model of the OpenID provider', () => {
  it('is full once the model holds the limit of unexpired entries, and not before', () => {
    const live = new LiveEntries();
    live.set('session', 'a', 2000);
    expect(live.full('session', 2, 1000)).toBe(false);
    live.set('session', 'b', 3000);
    expect(live.full('session', 2, 1000)).toBe(true);
    // Another model's entries count for that model only.
    expect(live.full('grant', 2, 1000)).toBe(false);
    expect(live.full('grant', 1, 1000)).toBe(false);
  });

  it('by default (docs/login.md) a model is full at 10,000 live entries, started sign-ins included', () => {
    // SecretModels.write refuses a new entry when LiveEntries says its model is full at this bound
    // (the bound itself, at a small value, is e2e/login/openid-provider-replicas.test.ts).
    expect(ENTRIES_PER_MODEL).toBe(10_000);
    const live = new LiveEntries();
    for (let i = 0; i < 9_999; i += 1) live.set('interaction', `started-${i}`, 2000);
    live.set('interaction', 'expired', 500);
    expect(live.full('interaction', ENTRIES_PER_MODEL, 1000)).toBe(false);
    live.set('interaction', 'started-9999', 2000);
    expect(live.full('interaction', ENTRIES_PER_MODEL, 1000)).toBe(true);
  });

  it('counts an expired entry not yet deleted as gone, from the moment it expires', () => {
    const live = new LiveEntries();
    live.set('session', 'a', 2000);
    live.set('session', 'b', 3000);
    expect(live.full('session', 2, 1999)).toBe(true);
    // The count kept at 1999 holds until the first of its entries expires, not past it.
    expect(live.full('session', 2, 2000)).toBe(false);
    expect(live.full('session', 1, 2000)).toBe(true);
    expect(live.full('session', 1, 3000)).toBe(false);
  });

  it('follows the informer: a changed expiry and a deleted entry change the answer at once', () => {
    const live = new LiveEntries();
    live.set('session', 'a', 2000);
    live.set('session', 'b', 2000);
    expect(live.full('session', 2, 1000)).toBe(true);
    live.remove('session', 'b');
    expect(live.full('session', 2, 1000)).toBe(false);
    live.set('session', 'b', 5000);
    expect(live.full('session', 2, 1000)).toBe(true);
    // An entry written again with an expiry already past no longer counts.
    live.set('session', 'a', 500);
    expect(live.full('session', 2, 1000)).toBe(false);
    live.remove('session', 'a');
    live.remove('session', 'unknown');
    expect(live.full('session', 1, 1000)).toBe(true);
  });
});
