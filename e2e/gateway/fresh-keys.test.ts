import { randomBytes } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { DEFAULT_AUTH_FAILURE_LIMITS } from '../../src/http/failure-limiter.ts';
import { composeAccessKey, generateAccessKey, parseAccessKey } from '../../src/identity/keys.ts';
import { uniqueName } from '../support/cluster.ts';
import { call, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * A CI job creates a key and uses it at once. The gateway's caches may not have seen the key (or
 * its user) yet: it must read past them instead of answering 401, so the first use works and
 * nothing counts as a failure. With the production failure limits (10 failures per key id).
 */
describe('gateway: keys used the moment they exist', () => {
  const env = useGatewayEnv({
    controllers: [],
    gateway: { authFailureLimits: DEFAULT_AUTH_FAILURE_LIMITS },
  });
  const ROUNDS = 25;

  const createKey = async (spec: Record<string, unknown>) => {
    const generated = generateAccessKey((size) => randomBytes(size));
    await env().custom.createClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'OwnedAccessKey',
        metadata: { name: uniqueName('ci') },
        spec: { type: 'User', ...spec, key: generated.key },
      },
    });
    return generated.key;
  };
  const listKeys = (token: string) => call(`${env().api}/ownedaccesskeys`, { token });

  test('a key created with kubectl-style writes works on its very first request, every time', async () => {
    await env().user('ci-bot');
    const statuses: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const token = await createKey({ user: 'ci-bot' });
      statuses.push((await listKeys(token)).status);
      // And keeps working: nothing was counted against it.
      statuses.push((await listKeys(token)).status);
    }
    expect(statuses).toEqual(new Array(ROUNDS * 2).fill(200));
  });

  test('a key minted through the gateway works on its very first request, every time', async () => {
    const minter = await env().user('minter');
    const statuses: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const created = await call(`${env().api}/ownedaccesskeys`, {
        method: 'POST',
        token: minter,
        headers: { 'Content-Type': 'application/yaml' },
        body: 'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  generateName: ci-\nspec:\n  ttl: 600\n',
      });
      expect(created.status, created.text).toBe(201);
      statuses.push((await listKeys(created.json.spec.key)).status);
    }
    expect(statuses).toEqual(new Array(ROUNDS).fill(200));
  });

  test('a user and a key created together work at once', async () => {
    const statuses: number[] = [];
    for (let round = 0; round < 5; round++) {
      const name = uniqueName('newcomer');
      await env().custom.createClusterCustomObject({
        group: 'management.platform',
        version: 'v1',
        plural: 'users',
        body: { apiVersion: GROUP_VERSION, kind: 'User', metadata: { name }, spec: { username: name } },
      });
      const token = await createKey({ user: name });
      statuses.push((await listKeys(token)).status);
    }
    expect(statuses).toEqual(new Array(5).fill(200));
  });

  test("others' failures with a key's public id never lock its owner out", async () => {
    const victim = await env().user('victim');
    const { id } = parseAccessKey(victim) as { id: string };
    // Well-formed keys with the victim's public id and secrets of the attacker's, well past the
    // per-key limit.
    const forged = () => composeAccessKey(id, generateAccessKey((size) => randomBytes(size)).secret);
    const attempts: number[] = [];
    for (let i = 0; i < DEFAULT_AUTH_FAILURE_LIMITS.perKey.failures + 5; i++) {
      attempts.push((await listKeys(forged())).status);
    }
    expect(attempts.every((status) => status === 401 || status === 429)).toBe(true);
    expect(attempts).toContain(429);
    // The owner, with the secret that verifies, is served.
    expect((await listKeys(victim)).status).toBe(200);
  });
});
