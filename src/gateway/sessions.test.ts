import { Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { FakeClock } from '../../test-support/fake-clock.ts';
import { CREATED, KeyCaches, testTeam, testUser } from '../../test-support/key-caches.ts';
import { type AuthenticatedIdentity, newKeyRecord } from '../identity/authenticate.ts';
import { GatewayMetrics } from './metrics.ts';
import { KeySessions } from './sessions.ts';

function setup() {
  const clock = new FakeClock(Date.parse(CREATED) + 1000);
  const caches = new KeyCaches(clock);
  const registry = new Registry();
  const sessions = new KeySessions({ authority: caches, clock, metrics: new GatewayMetrics(registry) });
  caches.putUser(testUser('alice'));
  caches.putUser(testUser('bob'));
  caches.putTeam(testTeam('ops'));
  const cuts: string[] = [];
  const hold = (identity: AuthenticatedIdentity, label: string) =>
    sessions.hold(identity, () => cuts.push(label));
  const cutCount = async (reason: string) => {
    const metric = await registry.getSingleMetric('gateway_long_lived_connections_cut_total')?.get();
    return metric?.values.find((value) => value.labels.reason === reason)?.value ?? 0;
  };
  return { clock, caches, sessions, registry, cuts, hold, cutCount };
}

describe('connections held by a key end when the key stops being valid', () => {
  test('disabling the key cuts each of its connections once, and no other key', async () => {
    const { caches, sessions, cuts, hold, cutCount } = setup();
    const alice = caches.addKey({ user: 'alice' });
    const other = caches.addKey({ user: 'alice' });
    hold(alice.identity, 'watch');
    hold(alice.identity, 'exec');
    hold(other.identity, 'other');
    caches.putKey({ ...alice.object, spec: { ...alice.object.spec, disabled: true } });
    expect(cuts.sort()).toEqual(['exec', 'watch']);
    expect(sessions.count()).toBe(1);
    expect(await cutCount('KeyDisabled')).toBe(2);
    caches.putKey({ ...alice.object, spec: { ...alice.object.spec, disabled: true } });
    expect(cuts).toHaveLength(2);
  });

  test('deleting the key (being deleted, or gone from the caches) cuts', async () => {
    const { caches, cuts, hold, cutCount } = setup();
    const terminating = caches.addKey({ user: 'alice' });
    const deleted = caches.addKey({ user: 'alice' });
    hold(terminating.identity, 'terminating');
    hold(deleted.identity, 'deleted');
    caches.putKey({
      ...terminating.object,
      metadata: { ...terminating.object.metadata, deletionTimestamp: CREATED },
    });
    expect(cuts).toEqual(['terminating']);
    caches.deleteKey(deleted.object.metadata.name ?? '');
    expect(cuts).toEqual(['terminating', 'deleted']);
    expect(await cutCount('KeyDeleted')).toBe(1);
  });

  test('a key made again under the same name does not keep the old key connections', () => {
    const { caches, cuts, hold } = setup();
    const old = caches.addKey({ user: 'alice' });
    hold(old.identity, 'old');
    const replacement = caches.addKey({ user: 'alice' });
    caches.putKey({ ...replacement.object, metadata: old.object.metadata });
    expect(cuts).toEqual(['old']);
  });

  test('expiry cuts at the expiry time, without any change event', async () => {
    const { clock, caches, sessions, cuts, hold, cutCount } = setup();
    const short = caches.addKey({ user: 'alice', ttl: 60 });
    hold(short.identity, 'short');
    // The key was created one second before the clock started: 59 s left.
    await clock.advance(58_000);
    expect(cuts).toEqual([]);
    await clock.advance(1_000);
    expect(cuts).toEqual(['short']);
    expect(await cutCount('KeyExpired')).toBe(1);
    expect(sessions.count()).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  test('a shorter lifetime limit cuts the connections it expires', () => {
    const { caches, cuts, hold } = setup();
    const key = caches.addKey({ user: 'alice' });
    hold(key.identity, 'watch');
    caches.limitsChanged();
    expect(cuts).toEqual([]);
    (caches.context as { limits: object }).limits = { accessKeyMaxTTLSeconds: 1 };
    caches.limitsChanged();
    expect(cuts).toEqual(['watch']);
  });

  test('the owner removed or disabled cuts; a team key ends with its team', async () => {
    const { caches, cuts, hold, cutCount } = setup();
    const alice = caches.addKey({ user: 'alice' });
    const bob = caches.addKey({ user: 'bob' });
    const ops = caches.addKey({ team: 'ops' });
    hold(alice.identity, 'alice');
    hold(bob.identity, 'bob');
    hold(ops.identity, 'ops');
    caches.putUser(testUser('alice', { disabled: true }));
    expect(cuts).toEqual(['alice']);
    expect(await cutCount('OwnerDisabled')).toBe(1);
    caches.deleteUser('bob');
    expect(cuts).toEqual(['alice', 'bob']);
    caches.deleteTeam('ops');
    expect(cuts).toEqual(['alice', 'bob', 'ops']);
    expect(await cutCount('OwnerInvalid')).toBe(2);
  });

  test('changes that leave the key valid cut nothing', () => {
    const { caches, cuts, hold, sessions } = setup();
    const alice = caches.addKey({ user: 'alice' });
    const ops = caches.addKey({ team: 'ops' });
    const subject = caches.addKey({ subject: 'ci-bot' });
    hold(alice.identity, 'alice');
    hold(ops.identity, 'ops');
    hold(subject.identity, 'subject');
    const sibling = caches.addKey({ user: 'alice' });
    caches.putKey({ ...sibling.object, spec: { ...sibling.object.spec, disabled: true } });
    caches.deleteKey(sibling.object.metadata.name ?? '');
    caches.putKey({ ...alice.object, metadata: { ...alice.object.metadata, labels: { note: 'x' } } });
    caches.putUser(testUser('alice', {}, { note: 'x' }));
    caches.deleteUser('bob');
    caches.putTeam(testTeam('ops', { displayName: 'Operations' }));
    caches.deleteTeam('other');
    caches.limitsChanged();
    expect(cuts).toEqual([]);
    expect(sessions.count()).toBe(3);
  });

  test('a connection that ended is never cut, and leaves no timer behind', () => {
    const { clock, caches, cuts, hold, sessions } = setup();
    const key = caches.addKey({ user: 'alice', ttl: 3600 });
    const release = hold(key.identity, 'watch');
    expect(clock.pendingTimers).toBe(1);
    release();
    release();
    caches.deleteKey(key.object.metadata.name ?? '');
    expect(cuts).toEqual([]);
    expect(sessions.count()).toBe(0);
    expect(clock.pendingTimers).toBe(0);
  });

  test('a key the caches do not hold yet is not cut for that, and is judged once they do', async () => {
    const { clock, caches, cuts, hold } = setup();
    const key = caches.addKey({ user: 'alice' });
    caches.records.delete(key.object.metadata.name ?? ''); // read past the caches, not cached yet
    hold(key.identity, 'watch');
    await clock.advance(1000);
    expect(cuts).toEqual([]);
    caches.putKey(key.object);
    expect(cuts).toEqual([]);
    caches.putKey({ ...key.object, spec: { ...key.object.spec, disabled: true } });
    expect(cuts).toEqual(['watch']);
  });

  test('a key disabled between its authentication and the hold is cut at once', async () => {
    const { clock, caches, cuts, hold } = setup();
    const key = caches.addKey({ user: 'alice' });
    caches.records.set(
      key.object.metadata.name ?? '',
      newKeyRecord({ ...key.object, spec: { ...key.object.spec, disabled: true } }),
    );
    hold(key.identity, 'watch');
    await clock.advance(0);
    expect(cuts).toEqual(['watch']);
  });

  test('the metrics name no key, user or team', async () => {
    const { caches, hold, registry } = setup();
    const key = caches.addKey({ user: 'alice' });
    hold(key.identity, 'watch');
    caches.deleteKey(key.object.metadata.name ?? '');
    const text = await registry.metrics();
    expect(text).toContain('gateway_long_lived_connections_cut_total{reason="KeyDeleted"} 1');
    expect(text).toContain('gateway_long_lived_connections 0');
    expect(text).not.toContain(key.identity.accessKey.id);
    expect(text).not.toContain('alice');
  });
});
