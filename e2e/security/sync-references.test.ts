// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { hostNameLong } from '../../src/sync/names.ts';
import { eventually } from '../support/wait.ts';
import {
  b64,
  createInstanceAsMallory,
  FINANCE,
  leaksOf,
  MP,
  syncingWhen,
  TEAM,
  useTenantPlatform,
  virtualEventsAbout,
} from './support.ts';

/**
 * Issue 30: `reference` patches on every synced kind, both directions, attacked as mallory would
 * (a member of project team with `edit`, owning a virtual cluster and creating
 * VirtualClusterInstances in her namespace; the components and each syncer as their own
 * ServiceAccounts). She points references at kinds the syncer does not sync, at finance's
 * namespace, and (editing the synced copy on the host, as `edit` lets her) at a host Secret that
 * is no virtual cluster's. None of it reaches or changes anything but her own objects, and
 * neither finance's password nor the host Secret's value shows up anywhere else.
 */
describe('a tenant cannot reach objects that are not hers through reference patches', () => {
  const env = useTenantPlatform();
  const configMaps = (namespace: string) => `/api/v1/namespaces/${namespace}/configmaps`;
  const secrets = (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`;
  /** Names and resourceVersions: what a write would change. */
  const versions = async (collection: string) =>
    (await env().admin.list(collection))
      .map((o: any) => `${o.metadata.name}@${o.metadata.resourceVersion}`)
      .sort();

  test('a reference to a kind the syncer does not sync is refused at admission, with the field named', async () => {
    const e = env();
    const answer = await createInstanceAsMallory(e, 'roles', {
      sync: {
        toHost: {
          configMaps: {
            enabled: true,
            patches: [
              {
                path: 'metadata.annotations["example.com/role"]',
                reference: { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role' },
              },
            ],
          },
        },
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.details.causes).toContainEqual({
      field: 'spec.config',
      reason: 'FieldValueInvalid',
      message:
        'sync.toHost.configMaps.patches[0].reference.kind: rbac.authorization.k8s.io/v1 Role is not synced by the syncer (a reference may name v1 Endpoints, Service, Secret, ConfigMap)',
    });
    expect(await e.admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/roles`)).toBeNull();
  });

  const hostValue = 'host-only-7c1e2f';
  let financeSecretsBefore: string[] = [];
  let financeConfigMapsBefore: string[] = [];
  const hostPointerPath = `${configMaps(TEAM)}/${hostNameLong('pointer', 'apps', 'refs')}`;

  test("a reference to finance's namespace names her own virtual namespace's object, synced into hers", async () => {
    const e = env();
    // A host Secret in her namespace that is no virtual cluster's (the admin's).
    await e.admin.create(secrets(TEAM), {
      metadata: { name: 'platform-db' },
      data: { password: b64(hostValue) },
    });
    financeSecretsBefore = await versions(secrets(FINANCE));
    financeConfigMapsBefore = await versions(configMaps(FINANCE));

    const created = await createInstanceAsMallory(e, 'refs', {
      sync: {
        toHost: {
          configMaps: {
            enabled: true,
            patches: [
              // An object naming a Secret and its namespace, and possibly another kind.
              {
                path: 'data',
                reference: {
                  apiVersion: 'v1',
                  kind: 'Secret',
                  namePath: 'name',
                  namespacePath: 'namespace',
                  kindPath: 'kind',
                },
              },
              {
                path: 'metadata.annotations["example.com/db"]',
                reference: { apiVersion: 'v1', kind: 'Secret' },
              },
            ],
          },
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await syncingWhen(e, 'refs', (c) => c.status === 'True', 'the syncer to run');

    // finance's SharedSecret by its namespace and name: the name she gets is her own virtual
    // namespace's object, on the host in her namespace.
    await e.virtual.create('/api/v1/namespaces', { metadata: { name: FINANCE } });
    await e.virtual.create(secrets(FINANCE), {
      metadata: { name: e.secret.name },
      data: { password: b64('decoy') },
    });
    await e.virtual.create(configMaps('apps'), {
      metadata: { name: 'pointer', annotations: { 'example.com/db': 'db' } },
      data: { name: e.secret.name, namespace: e.secret.namespace },
    });
    let pointer: any;
    await eventually(
      async () => {
        pointer = await e.admin.get(hostPointerPath);
        return pointer !== null;
      },
      60_000,
      'the host copy of pointer',
    );
    expect(pointer.data).toEqual({ name: hostNameLong(e.secret.name, FINANCE, 'refs'), namespace: TEAM });
    const decoyPath = `${secrets(TEAM)}/${hostNameLong(e.secret.name, FINANCE, 'refs')}`;
    await eventually(
      async () => (await e.admin.get(decoyPath)) !== null,
      60_000,
      'the referenced decoy on the host',
    );
    expect((await e.admin.get(decoyPath)).data).toEqual({ password: b64('decoy') });

    expect(await versions(secrets(FINANCE))).toEqual(financeSecretsBefore);
  });

  test('a kind the syncer does not sync, read through kindPath, fails that object; nothing is written', async () => {
    const e = env();
    await e.virtual.create(configMaps('apps'), {
      metadata: { name: 'sa-pointer' },
      data: { name: 'platform-controller', namespace: 'platform-system', kind: 'ServiceAccount' },
    });
    await eventually(
      async () =>
        (await virtualEventsAbout(e, 'apps', 'ConfigMap', 'sa-pointer')).some(
          (event: any) => event.reason === 'SyncError' && event.note.includes('ReferencePatchError'),
        ),
      60_000,
      'a SyncError Event on sa-pointer',
    );
    expect(await e.admin.get(`${configMaps(TEAM)}/${hostNameLong('sa-pointer', 'apps', 'refs')}`)).toBeNull();
  });

  test("a host Secret's name she writes on her host copy does not come back; nothing leaks", async () => {
    const e = env();
    // On the host, she points her synced copy at the admin's Secret (one write, with an
    // annotation that comes back as it is): the name does not come back, nothing is imported.
    await e.mallory.merge(hostPointerPath, {
      metadata: { annotations: { 'example.com/db': 'platform-db', 'example.com/note': 'seen' } },
    });
    let back: any;
    await eventually(
      async () => {
        back = await e.virtual.get(`${configMaps('apps')}/pointer`);
        return back?.metadata.annotations['example.com/note'] === 'seen';
      },
      60_000,
      'the host edit brought back',
    );
    expect(back.metadata.annotations['example.com/db']).toBe('db');
    expect(await e.virtual.get(`${secrets('apps')}/platform-db`)).toBeNull();
    expect((await e.admin.get(`${secrets(TEAM)}/platform-db`)).metadata.labels ?? {}).toEqual({});

    // Nothing of finance's was written; neither value is anywhere it was not put.
    expect(await versions(secrets(FINANCE))).toEqual(financeSecretsBefore);
    expect(await versions(configMaps(FINANCE))).toEqual(financeConfigMapsBefore);
    expect(await leaksOf(e, e.secret.value)).toEqual([]);
    const hostValueLeaks = await leaksOf(e, hostValue);
    expect(hostValueLeaks.filter((where) => !where.startsWith('audit: create'))).toEqual([
      `host Secret ${TEAM}/platform-db`,
    ]);
  });
});
