// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { afterAll, describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import type { Http } from '../chart/rbac-support.ts';
import { eventually } from '../support/wait.ts';
import {
  conditionOf,
  FINANCE,
  leaksOf,
  MP,
  settledWrites,
  syncerTokenAsMallory,
  TEAM,
  useTenantPlatform,
} from './support.ts';

/**
 * Issue 15, item 1: "any SharedSecret can be read through the syncer". Mallory, a member of
 * project team with its `edit` role, wants finance's SharedSecret `prod-db`. Each way she could
 * ask the platform to copy it into her namespace is tried, as she would try it; each must fail,
 * and the password must be nowhere she (or anyone) could read it: not in any object of the host
 * or of her virtual cluster, not in an Event or a condition, not in the components' logs, not in
 * the apiserver's audit log.
 */
describe('a project member cannot get another project’s SharedSecret copied to her', () => {
  const env = useTenantPlatform();
  const labels = {
    'management.platform/sharedsecret-name': 'prod-db',
    'management.platform/sharedsecret-namespace': FINANCE,
  };
  let asSyncer: Http | undefined;
  afterAll(() => asSyncer?.close());

  test('through her virtual cluster: a virtual Secret labelled for prod-db is never filled, and nothing fights over its host copy', async () => {
    const { virtual, admin } = env();
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'grab', labels },
      data: { note: Buffer.from('mine').toString('base64') },
    });
    // The syncer deals with it: a host copy without the platform's labels, or a failure shown
    // in the instance's Syncing condition; either way it is over once writes stop.
    const hostName = hostNameLong('grab', 'apps', 'dev');
    await eventually(
      async () => {
        const copy = await admin.get(`/api/v1/namespaces/${TEAM}/secrets/${hostName}`);
        const syncing = conditionOf(
          await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`),
          'Syncing',
        );
        return (
          copy !== null || (syncing?.status === 'False' && String(syncing.message).includes('apps/grab'))
        );
      },
      60_000,
      'the syncer to have dealt with the labelled Secret',
    );
    const settled = await settledWrites(env(), ['secrets'], { quietMs: 5_000, timeoutMs: 60_000 });
    expect(settled, 'writes to Secrets settle (no two controllers fight over the copy)').toMatchObject({
      settled: true,
    });
    const copy = await admin.get(`/api/v1/namespaces/${TEAM}/secrets/${hostName}`);
    if (copy) {
      expect(copy.data?.password).toBeUndefined();
      expect(copy.data?.note).toBe(Buffer.from('mine').toString('base64'));
    }
    expect(await leaksOf(env(), env().secret.value)).toEqual([]);
  });

  test('directly: her own labelled Secret is refused (403), as she may not get prod-db', async () => {
    const answer = await env().mallory.call('POST', `/api/v1/namespaces/${TEAM}/secrets`, {
      body: { metadata: { name: 'direct', labels } },
    });
    expect(answer.status).toBe(403);
    expect(answer.body.message).toContain('may not get sharedsecrets.management.platform "prod-db"');
    // Relabelling an existing Secret is the same request.
    await env().mallory.create(`/api/v1/namespaces/${TEAM}/secrets`, { metadata: { name: 'plain' } });
    const relabel = await env().mallory.call('PATCH', `/api/v1/namespaces/${TEAM}/secrets/plain`, {
      body: { metadata: { labels } },
      contentType: 'application/merge-patch+json',
    });
    expect(relabel.status).toBe(403);
    expect(await leaksOf(env(), env().secret.value)).toEqual([]);
  });

  test("as her syncer: she mints its token (edit may) and sets the labels as it; the platform's identities never pass the check", async () => {
    asSyncer = await syncerTokenAsMallory(env());
    const answer = await asSyncer.call('POST', `/api/v1/namespaces/${TEAM}/secrets`, {
      body: { metadata: { name: 'as-syncer', labels } },
    });
    expect(answer.status).toBe(403);
    expect(answer.body.message).toContain('identity of the platform itself');
    // Even the controller's own identity, which may read every SharedSecret, does not pass it.
    const asController = await env().components.controller.call(
      'POST',
      `/api/v1/namespaces/${TEAM}/secrets`,
      {
        body: { metadata: { name: 'as-controller', labels } },
      },
    );
    expect(asController.status).toBe(403);
    expect(await leaksOf(env(), env().secret.value)).toEqual([]);
  });

  test("as her syncer: the syncer's identity reads nothing outside her namespace", async () => {
    asSyncer ??= await syncerTokenAsMallory(env());
    const denied = async (method: string, path: string, body?: unknown) =>
      (await asSyncer!.call(method, path, body === undefined ? {} : { body })).status;
    expect(await denied('GET', `${MP}/namespaces/${FINANCE}/sharedsecrets/prod-db`)).toBe(403);
    expect(await denied('GET', `/api/v1/namespaces/${FINANCE}/secrets`)).toBe(403);
    expect(await denied('GET', '/api/v1/secrets')).toBe(403);
    expect(await denied('GET', `${MP}/namespaces/${TEAM}/sharedsecrets`)).toBe(403);
    expect(await leaksOf(env(), env().secret.value)).toEqual([]);
  });
});
