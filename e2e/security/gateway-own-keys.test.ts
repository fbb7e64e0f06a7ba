import pino from 'pino';
import { beforeAll, describe, expect, test } from 'vitest';
import type { OwnedAccessKey } from '../../src/api/ownedaccesskey.ts';
import { resources, type Stored } from '../../src/api/resources.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import { Informer } from '../../src/runtime/informer.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 1 of issue 16: a non-admin's write to its own key was previewed with dryRun, checked, and
 * then the client's patch sent again without a precondition, so a concurrent change landed
 * unchecked. The attack: the owner races JSON patches that copy `spec.identity.groups` (what a
 * login connector said) into `spec.groups` (the extra groups the key acts with) while the
 * platform refreshes `spec.identity.groups` to `[ops]`. Whatever interleaving the race takes,
 * the key must never carry `ops`: every version the apiserver stored is watched and checked.
 * Owners also cannot write `spec.identity` or `spec.groups`, nor widen a scope, directly.
 */
describe('security: writes to your own access key are checked on exactly what is stored', () => {
  const env = useGatewayEnv();
  let alice: string;
  let keyName: string;
  const keyPath = () => `/apis/${GROUP_VERSION}/ownedaccesskeys/${keyName}`;

  beforeAll(async () => {
    alice = await env().user(uniqueName('alice'));
    // The key may not be cached yet: `authenticate` reads it past the caches then.
    const identity = await env().gateway.authenticator.authenticate(alice);
    if (!identity.ok) throw new Error('alice is not authenticated');
    keyName = identity.identity.accessKey.name;
    // What a login would have stored: the connector's groups, none the key acts with.
    await new KubeClient(env().kc).request({
      method: 'PATCH',
      path: keyPath(),
      contentType: 'application/merge-patch+json',
      body: { spec: { identity: { connector: 'oidc', groups: [] } } },
    });
  });

  const patchAsAlice = (operations: unknown[]) =>
    call(`${env().api}/ownedaccesskeys/${keyName}`, {
      method: 'PATCH',
      token: alice,
      headers: { 'Content-Type': 'application/json-patch+json' },
      body: JSON.stringify(operations),
    });

  test('racing a copy of spec.identity.groups into spec.groups against an identity refresh never lands ops', async () => {
    const admin = new KubeClient(env().kc);
    // Every version the apiserver stores, as a watch delivers them.
    const stored: unknown[][] = [];
    const watcher = new Informer<Stored<OwnedAccessKey>>({
      api: admin,
      resource: resources.ownedAccessKeys,
      fieldSelector: `metadata.name=${keyName}`,
      clock: systemClock,
      random: systemRandom,
      logger: pino({ level: 'silent' }),
    });
    const record = (key: Stored<OwnedAccessKey>) => stored.push(key.spec.groups ?? []);
    watcher.addEventHandler({ onAdd: record, onUpdate: (_old, key) => record(key), onDelete: () => {} });
    watcher.start();
    await watcher.waitForSync();
    const answers: number[] = [];
    const refresh = async () => {
      for (let round = 0; round < 30; round++) {
        await admin.request({
          method: 'PATCH',
          path: keyPath(),
          contentType: 'application/merge-patch+json',
          body: { spec: { identity: { groups: round % 2 === 0 ? ['ops'] : [] } } },
        });
      }
    };
    const copy = async () => {
      for (let round = 0; round < 30; round++) {
        const answer = await patchAsAlice([
          { op: 'copy', from: '/spec/identity/groups', path: '/spec/groups' },
        ]);
        answers.push(answer.status);
        expect([200, 403, 409], answer.text).toContain(answer.status);
      }
    };
    await Promise.all([refresh(), copy(), copy(), copy()]);
    const final = await admin.request<{ spec: { groups?: string[] }; metadata: { resourceVersion: string } }>(
      {
        method: 'GET',
        path: keyPath(),
      },
    );
    await eventually(
      () => watcher.store.get(keyName)?.metadata.resourceVersion === final.metadata.resourceVersion,
      30_000,
      'the watch to see the last version',
    );
    await watcher.stop();
    expect(final.spec.groups ?? []).not.toContain('ops');
    expect(stored.flat()).not.toContain('ops');
    // The race was run: some copies were checked and refused, some landed (with no groups).
    expect(answers).toContain(403);
    expect(answers).toContain(200);
  });

  test('the owner cannot write spec.identity or spec.groups, nor widen a scope', async () => {
    for (const operations of [
      [{ op: 'add', path: '/spec/identity/groups', value: ['ops'] }],
      [{ op: 'add', path: '/spec/groups', value: ['ops'] }],
      [{ op: 'add', path: '/spec/groups', value: ['platform:authenticated'] }],
    ]) {
      const answer = await patchAsAlice(operations);
      expect(answer.status, answer.text).toBe(403);
    }
    const scoped = await patchAsAlice([
      { op: 'add', path: '/spec/scope', value: { projects: [{ project: 'web' }] } },
    ]);
    expect(scoped.status, scoped.text).toBe(200);
    const wider = await patchAsAlice([
      { op: 'replace', path: '/spec/scope', value: { projects: [{ project: '*' }] } },
    ]);
    expect(wider.status, wider.text).toBe(403);
    const gone = await patchAsAlice([{ op: 'remove', path: '/spec/scope' }]);
    expect(gone.status, gone.text).toBe(403);
    const stored = await new KubeClient(env().kc).request<{ spec: Record<string, unknown> }>({
      method: 'GET',
      path: keyPath(),
    });
    expect(stored.spec.scope).toEqual({ projects: [{ project: 'web' }] });
    expect(stored.spec.groups ?? []).toEqual([]);
  });
});
