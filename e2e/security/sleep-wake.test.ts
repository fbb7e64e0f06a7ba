import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../../src/api/labels.ts';
import { resources, type Stored } from '../../src/api/resources.ts';
import type { Scope } from '../../src/api/scope.ts';
import type { VirtualClusterInstance } from '../../src/api/virtualclusterinstance.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import {
  INSTANCE,
  namespaceOf,
  PENDING,
  SHOP,
  SHOP_INSTANCE,
  useProvisionedEnv,
  WEB,
} from '../access-proxy/provisioned-env.ts';
import { writeGatewayKubeconfig } from '../gateway/support.ts';
import { type ResponseBytes, rawRequest } from '../support/access-proxy.ts';
import { runPlatform } from '../support/platform-cli.ts';
import { clearLastActivity, markAsleep, markAwake, readInstance } from '../support/sleeping-instances.ts';
import { eventually } from '../support/wait.ts';

/**
 * Sleep mode against tenants (issue 27): only a request the platform authenticated and whose key's
 * scope allows it wakes a virtual cluster. A request without a valid key, or with a key scoped
 * elsewhere (another virtual cluster, another project, rules that do not allow it), never writes
 * the wake request, is answered at once, and its answer is the same whether the instance sleeps,
 * is awake or does not exist: it learns nothing of the instance's state.
 */
describe('security: waking a virtual cluster', () => {
  const env = useProvisionedEnv();
  const admin = () => new KubeClient(env().gateway.kc);
  const web = namespaceOf(WEB);
  const request = (token: string | undefined, instance: string, path = '/api/v1/namespaces') =>
    rawRequest(`${env().proxyUrl(WEB, instance)}${path}`, env().gateway.dispatcher, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });

  /** INSTANCE asleep and PENDING awake, as the controller leaves them; both seen by the gateway; no activity yet. */
  async function oneAsleepOneAwake(): Promise<void> {
    const informer = env().gateway.manager.informer<Stored<VirtualClusterInstance>>(
      resources.virtualClusterInstances,
    );
    for (const [name, mark] of [
      [INSTANCE, markAsleep],
      [PENDING, markAwake],
    ] as const) {
      await clearLastActivity(admin(), web, name);
      const marked = await mark(admin(), web, name, new Date(Date.now() - 60_000));
      await eventually(
        () =>
          informer.store.getByName(web, name)?.metadata.resourceVersion === marked.metadata.resourceVersion,
        30_000,
        `the gateway to see ${name}`,
      );
    }
  }

  /** The answer with the instance's name put back as `<name>`: what differs between instances otherwise. */
  const shape = (answer: ResponseBytes, name: string) => ({
    status: answer.status,
    retryAfter: answer.headers.get('retry-after'),
    body: answer.body.toString().replaceAll(name, '<name>'),
  });

  async function expectUntouched(before: Stored<VirtualClusterInstance>): Promise<void> {
    const after = await readInstance(admin(), web, INSTANCE);
    expect(after.metadata.annotations?.[LAST_ACTIVITY_ANNOTATION]).toBeUndefined();
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  }

  async function scopedKey(scope: Scope): Promise<string> {
    const token = await env().gateway.key({ user: 'alice', scope });
    await env().gateway.accepted(token);
    return token;
  }

  test('no key, a malformed key, a valid key altered: 401, the same answer as for an awake or missing instance, nothing woken', async () => {
    await oneAsleepOneAwake();
    const before = await readInstance(admin(), web, INSTANCE);
    const altered = `${env().keys.alice.slice(0, -6)}AAAAAA`;
    for (const token of [undefined, 'not-a-key', altered]) {
      const asleep = await request(token, INSTANCE);
      expect(asleep.status).toBe(401);
      expect(asleep.json).toMatchObject({ kind: 'Status', code: 401 });
      expect(shape(asleep, INSTANCE)).toEqual(shape(await request(token, PENDING), PENDING));
      expect(shape(asleep, INSTANCE)).toEqual(shape(await request(token, 'ghost'), 'ghost'));
    }
    await expectUntouched(before);
  });

  test.each<[string, Scope]>([
    [
      'another virtual cluster of another project',
      { virtualClusters: [{ project: SHOP, virtualCluster: SHOP_INSTANCE }] },
    ],
    ['another project', { projects: [{ project: SHOP }] }],
    [
      'rules that allow only reading configmaps',
      { rules: [{ verbs: ['get'], resources: [{ group: '', resources: ['configmaps'] }] }] },
    ],
  ])(
    'a key scoped to %s: 403 at once, the same answer as for an awake or missing instance, nothing woken',
    async (_, scope) => {
      await oneAsleepOneAwake();
      const before = await readInstance(admin(), web, INSTANCE);
      const token = await scopedKey(scope);
      const asleep = await request(token, INSTANCE);
      expect(asleep.status).toBe(403);
      expect(asleep.json).toMatchObject({ kind: 'Status', code: 403 });
      expect(asleep.json.message).toContain('scope');
      expect(asleep.json.message).not.toMatch(/sleep|wak/i);
      expect(shape(asleep, INSTANCE)).toEqual(shape(await request(token, PENDING), PENDING));
      expect(shape(asleep, INSTANCE)).toEqual(shape(await request(token, 'ghost'), 'ghost'));
      await expectUntouched(before);
    },
  );

  test('an unscoped key of someone outside the project (its scope allows every path) neither wakes the instance nor keeps it awake', async () => {
    await oneAsleepOneAwake();
    const before = await readInstance(admin(), web, INSTANCE);
    const refused = await request(env().keys.bob, INSTANCE, '/api/v1/namespaces?timeout=1s');
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ kind: 'Status', code: 403, reason: 'Forbidden' });
    expect(refused.json.message).toBe(
      `virtual cluster "${WEB}/${INSTANCE}" is asleep, and only a person who may get its VirtualClusterInstance wakes it`,
    );
    await expectUntouched(before);
    // Requests to the awake instance are relayed (its own RBAC answers them) but are no activity of
    // it: the activity written is alice's, made after bob's (had bob's counted, the one write of the
    // 10 s interval would carry an earlier time, and alice's would have been held back).
    for (let i = 0; i < 3; i++) await request(env().keys.bob, PENDING, '/api/v1/namespaces?timeout=1s');
    const aliceAt = Date.now();
    await request(env().keys.alice, PENDING, '/api/v1/namespaces?timeout=1s');
    const stamp = async () =>
      (await readInstance(admin(), web, PENDING)).metadata.annotations?.[LAST_ACTIVITY_ANNOTATION];
    await eventually(
      async () => (await stamp()) !== undefined,
      30_000,
      "alice's request recorded as activity",
    );
    expect(Date.parse((await stamp()) ?? '')).toBeGreaterThanOrEqual(aliceAt);
  });

  test('platform sleep and wake with the key of a viewer of the project, or of another project: refused (403), nothing written', async () => {
    await oneAsleepOneAwake();
    const before = await readInstance(admin(), web, INSTANCE);
    const home = mkdtempSync(join(tmpdir(), 'sleep-wake-cli-'));
    const { carol, bob } = env().keys;
    for (const [who, token] of [
      ['carol', carol],
      ['bob', bob],
    ] as const) {
      const kubeconfig = writeGatewayKubeconfig(env().gateway, home, who, token);
      for (const command of ['sleep', 'wake']) {
        const run = await runPlatform(
          [command, INSTANCE, '--project', WEB, '--kubeconfig', kubeconfig],
          home,
        );
        expect(run.code, `${who} ${command}`).toBe(1);
        expect(run.stderr).toContain('the platform answered 403');
        expect(run.stderr).toContain(`User "${who}" cannot`);
      }
    }
    await expectUntouched(before);
    expect(
      (await readInstance(admin(), web, INSTANCE)).metadata.annotations?.[SLEEP_REQUESTED_ANNOTATION],
    ).toBeUndefined();
  });

  test('the same key allowed wakes it (the refusals above are the scope, not a broken wake)', async () => {
    await oneAsleepOneAwake();
    const token = await scopedKey({ virtualClusters: [{ project: WEB, virtualCluster: INSTANCE }] });
    const answer = await request(token, INSTANCE, '/api/v1/namespaces?timeout=1s');
    expect(answer.status).toBe(503);
    expect(answer.json.message).toContain('is waking up from sleep');
    const after = await readInstance(admin(), web, INSTANCE);
    expect(after.metadata.annotations?.[LAST_ACTIVITY_ANNOTATION]).toBeDefined();
  });
});
