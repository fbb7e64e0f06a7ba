import { CoreV1Api } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OIDC_EXPIRES_AT_ANNOTATION,
  OidcStateConsumed,
  OidcStateFull,
  SecretModels,
  stateSecretName,
} from '../../src/login/oidc-provider/secret-models.ts';
import { fieldManagers } from '../../src/runtime/field-managers.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';

/**
 * The OpenID provider's short-lived state as two gateway replicas see it: each replica has its own
 * Manager and cache over the same Secrets, so what one issues the other finds at once.
 */
describe('the OpenID provider state shared by gateway replicas', () => {
  const namespace = useNamespace('oidc-state');
  const managers: Manager[] = [];
  const core = () => hostKubeConfig().makeApiClient(CoreV1Api);
  let replicaA: SecretModels;
  let replicaB: SecretModels;
  let now = Date.now();

  const replica = async (entriesPerModel?: number) => {
    const api = new KubeClient(hostKubeConfig(), { fieldManager: fieldManagers.login });
    const manager = new Manager({ api, logger: pino({ level: 'silent' }) });
    const models = new SecretModels(manager, {
      api,
      namespace: namespace(),
      now: () => now,
      ...(entriesPerModel !== undefined ? { entriesPerModel } : {}),
    });
    await manager.start();
    managers.push(manager);
    return models;
  };

  /** A replica that has cached what is written now, and whose watch then delivers nothing more. */
  const laggingReplica = async () => {
    const models = await replica();
    const manager = managers.pop() as Manager;
    await expect.poll(() => manager.readiness().ready, { timeout: 30_000 }).toBe(true);
    await manager.stop();
    return models;
  };

  beforeAll(async () => {
    replicaA = await replica();
    replicaB = await replica();
  });
  afterAll(async () => {
    for (const manager of managers) await manager.stop();
  });

  it('an entry one replica wrote is found by the other at once, by id and by uid; its Secret holds no id', async () => {
    const id = `code-${Math.random().toString(36).slice(2)}`;
    const uid = `interaction-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('Interaction').upsert(id, { uid, params: { client_id: 'grafana' } }, 600);
    expect(await replicaB.model('Interaction').find(id)).toEqual({ uid, params: { client_id: 'grafana' } });
    expect(await replicaB.model('Interaction').findByUid(uid)).toMatchObject({ uid });
    expect(await replicaB.model('Session').find(id)).toBeUndefined();

    const secret = await core().readNamespacedSecret({
      name: stateSecretName('Interaction', id),
      namespace: namespace(),
    });
    expect(JSON.stringify(secret.metadata)).not.toContain(id);
    expect(JSON.stringify(secret.metadata)).not.toContain(uid);
  });

  it('a code is consumed once: the second consumption, on the other replica, fails', async () => {
    const id = `code-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('AuthorizationCode').upsert(id, { grantId: 'g1', accountId: 'alice' }, 60);
    await replicaA.model('AuthorizationCode').consume(id);
    expect((await replicaB.model('AuthorizationCode').find(id))?.consumed).toBeTypeOf('number');
    await expect(replicaB.model('AuthorizationCode').consume(id)).rejects.toBeInstanceOf(OidcStateConsumed);
  });

  it("a grant's entries are revoked together, from either replica", async () => {
    const grantId = `grant-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('AccessToken').upsert('token-1', { grantId, accountId: 'alice' }, 3600);
    await replicaA.model('AccessToken').upsert('token-2', { grantId, accountId: 'alice' }, 3600);
    await replicaA.model('AccessToken').upsert('token-3', { grantId: 'other', accountId: 'bob' }, 3600);
    await replicaB.model('AccessToken').revokeByGrantId(grantId);
    expect(await replicaA.model('AccessToken').find('token-1')).toBeUndefined();
    expect(await replicaA.model('AccessToken').find('token-2')).toBeUndefined();
    expect(await replicaA.model('AccessToken').find('token-3')).toMatchObject({ grantId: 'other' });
  });

  it('a replica whose cache lags answers what was written last: an interaction with its result, a session by uid', async () => {
    // A sign-in's next request comes a moment after the write that finished its interaction, before
    // any watch may have delivered it: a replica whose watch delivers nothing more makes that certain.
    const id = `interaction-${Math.random().toString(36).slice(2)}`;
    const sessionUid = `session-uid-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('Interaction').upsert(id, { uid: id, prompt: { name: 'login' } }, 600);
    await replicaA.model('Session').upsert('lagging-session', { uid: sessionUid, accountId: 'alice' }, 600);
    const lagging = await laggingReplica();

    await replicaA
      .model('Interaction')
      .upsert(id, { uid: id, result: { login: { accountId: 'alice' } } }, 600);
    await replicaA.model('Session').upsert('lagging-session', { uid: sessionUid, accountId: 'bob' }, 600);
    expect(await lagging.model('Interaction').find(id)).toEqual({
      uid: id,
      result: { login: { accountId: 'alice' } },
    });
    expect(await lagging.model('Session').findByUid(sessionUid)).toMatchObject({ accountId: 'bob' });
    await replicaA.model('Session').destroy('lagging-session');
    expect(await lagging.model('Session').findByUid(sessionUid)).toBeUndefined();
  });

  it("a grant's revocation by a replica whose cache lags misses no entry, however recent", async () => {
    const grantId = `grant-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('AccessToken').upsert('lag-token-1', { grantId, accountId: 'alice' }, 3600);
    const lagging = await laggingReplica();
    await replicaA.model('AccessToken').upsert('lag-token-2', { grantId, accountId: 'alice' }, 3600);
    await lagging.model('AccessToken').revokeByGrantId(grantId);
    expect(await replicaA.model('AccessToken').find('lag-token-1')).toBeUndefined();
    expect(await replicaA.model('AccessToken').find('lag-token-2')).toBeUndefined();
  });

  it('an expired entry is never answered and is deleted when it expires', async () => {
    const id = `session-${Math.random().toString(36).slice(2)}`;
    await replicaA.model('Session').upsert(id, { accountId: 'alice' }, 1);
    expect(await replicaB.model('Session').find(id)).toMatchObject({ accountId: 'alice' });
    const written = await core().readNamespacedSecret({
      name: stateSecretName('Session', id),
      namespace: namespace(),
    });
    expect(Date.parse(written.metadata?.annotations?.[OIDC_EXPIRES_AT_ANNOTATION] ?? '')).toBe(now + 1000);

    now += 2000;
    expect(await replicaB.model('Session').find(id)).toBeUndefined();
    await expect
      .poll(
        () =>
          core()
            .readNamespacedSecret({ name: stateSecretName('Session', id), namespace: namespace() })
            .then(() => 'present')
            .catch(() => 'deleted'),
        { timeout: 30_000 },
      )
      .toBe('deleted');
  });

  it('beyond its bound a model refuses new entries, and takes them again once old ones expire', async () => {
    const bounded = await replica(2);
    await bounded.model('ReplayDetection').upsert('r1', { iss: 'x' }, 60);
    await bounded.model('ReplayDetection').upsert('r2', { iss: 'x' }, 60);
    // Both must be in the bounded replica's cache before it can count them; each try is a new entry.
    let attempt = 0;
    await expect
      .poll(
        async () => {
          try {
            attempt += 1;
            await bounded.model('ReplayDetection').upsert(`r3-${attempt}`, { iss: 'x' }, 60);
            return 'accepted';
          } catch (err) {
            return err instanceof OidcStateFull ? 'refused' : String(err);
          }
        },
        { timeout: 30_000 },
      )
      .toBe('refused');
    // An entry already stored may still be written again (a session is saved on every request).
    await bounded.model('ReplayDetection').upsert('r1', { iss: 'y' }, 60);
    now += 61_000;
    await bounded.model('ReplayDetection').upsert('r4', { iss: 'x' }, 60);
    expect(await bounded.model('ReplayDetection').find('r4')).toEqual({ iss: 'x' });
  });
});
