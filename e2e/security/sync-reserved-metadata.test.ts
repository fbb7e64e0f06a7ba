// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../../src/api/labels.ts';
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
 * Issue 15: "nothing from the virtual side sets reserved metadata on the host", attacked as
 * mallory would: a member of project team with `edit`, who owns a virtual cluster and creates
 * VirtualClusterInstances in her namespace, with the components running as their own
 * ServiceAccounts and each syncer as its own. Labels that make Secret sync copy finance's
 * SharedSecret, set on a virtual Secret and by a whole-object patch; a Secret turned into a
 * service-account token, by a patch on `type` and by a whole-object patch, and a virtual token
 * Secret as it is. Each fails, and finance's password is nowhere but where it belongs: not in any
 * object of the host or of the virtual cluster, an Event, a condition, a log line or the
 * apiserver's audit log.
 */
describe('a tenant cannot steer host controllers through what its syncer writes', () => {
  const env = useTenantPlatform();
  const reserved = { [SOURCE_NAME_LABEL]: 'prod-db', [SOURCE_NAMESPACE_LABEL]: FINANCE };
  const secrets = (namespace: string) => `/api/v1/namespaces/${namespace}/secrets`;
  /** A Secret labelled for prod-db by the cluster admin (who may read it), filled by Secret sync. */
  const controlCopy = async (name: string) => {
    await env().admin.create(secrets('control'), { metadata: { name, labels: reserved } });
    await eventually(
      async () =>
        (await env().admin.get(`${secrets('control')}/${name}`))?.data?.password === b64(env().secret.value),
      60_000,
      `Secret sync to fill control/${name}`,
    );
  };

  test("labels asking for another project's SharedSecret never reach the host; its value goes nowhere", async () => {
    const e = env();
    // The path the attack aims at works: a Secret so labelled by someone who may read the
    // SharedSecret (the cluster admin, in a namespace of nobody's project) is filled.
    await e.admin.create('/api/v1/namespaces', { metadata: { name: 'control' } });
    await controlCopy('copy');

    const created = await createInstanceAsMallory(e, 'labels', {
      sync: {
        toHost: {
          secrets: {
            enabled: true,
            patches: [
              // A whole-object patch that puts the labels on every Secret it syncs.
              {
                path: '',
                expression: `({ metadata: { ...value.metadata, labels: { ...value.metadata.labels, ...${JSON.stringify(reserved)} } } })`,
              },
            ],
          },
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await syncingWhen(e, 'labels', (c) => c.status === 'True', 'the syncer to run');
    await e.virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'stolen', labels: { ...reserved, app: 'db' } },
      data: { password: b64('decoy') },
    });
    // Synced by her two instances ('dev', without patches, and 'labels'): without the labels.
    const copies = ['labels', 'dev'].map((vc) => `${secrets(TEAM)}/${hostNameLong('stolen', 'apps', vc)}`);
    for (const path of copies) {
      await eventually(async () => (await e.admin.get(path)) !== null, 60_000, `the host copy ${path}`);
      const synced = await e.admin.get(path);
      expect(synced.metadata.labels.app).toBe('db');
      expect(synced.metadata.labels[SOURCE_NAME_LABEL]).toBeUndefined();
      expect(synced.metadata.labels[SOURCE_NAMESPACE_LABEL]).toBeUndefined();
      expect(synced.data).toEqual({ password: b64('decoy') });
    }
    // Secret sync is at work after the copies exist (it fills a Secret labelled since), and the
    // copies still hold the virtual data.
    await controlCopy('copy-after');
    for (const path of copies) expect((await e.admin.get(path)).data).toEqual({ password: b64('decoy') });

    const byDesign = (where: string) =>
      ['copy', 'copy-after'].some(
        (name) =>
          where === `host Secret control/${name}` ||
          where ===
            `audit: patch ${secrets('control')}/${name} by system:serviceaccount:platform-system:platform-controller`,
      );
    const leaks = await leaksOf(e, e.secret.value);
    expect(leaks.filter((where) => !byDesign(where))).toEqual([]);
    expect(leaks).toContain('host Secret control/copy');
  });

  test('a patch on type is refused at admission, with the field named', async () => {
    const e = env();
    const answer = await createInstanceAsMallory(e, 'typed', {
      sync: {
        toHost: {
          secrets: {
            enabled: true,
            patches: [{ path: 'type', expression: '"kubernetes.io/service-account-token"' }],
          },
        },
      },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.details.causes).toContainEqual({
      field: 'spec.config',
      reason: 'FieldValueInvalid',
      message: 'sync.toHost.secrets.patches[0].path: "type" may not patch type',
    });
    expect(await e.admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/typed`)).toBeNull();
  });

  test('no Secret becomes a service-account token on the host: not by a whole-object patch, not as it is', async () => {
    const e = env();
    // A ServiceAccount of her namespace (edit may make one) whose token she is after.
    await e.mallory.create(`/api/v1/namespaces/${TEAM}/serviceaccounts`, { metadata: { name: 'deployer' } });
    const created = await createInstanceAsMallory(e, 'tokens', {
      sync: {
        toHost: {
          secrets: {
            enabled: true,
            patches: [
              {
                path: '',
                expression:
                  '({ type: "kubernetes.io/service-account-token", metadata: { ...value.metadata, annotations: { ...value.metadata.annotations, "kubernetes.io/service-account.name": "deployer" } } })',
              },
            ],
          },
        },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    // Running (the Secrets of the earlier tests fail under this patch too, so not necessarily True).
    await syncingWhen(e, 'tokens', (c) => c.reason !== 'Starting', 'the syncer to run');
    // An Opaque Secret the patch would turn into a token Secret of the host's ServiceAccount.
    await e.virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'turned', annotations: { 'kubernetes.io/service-account.name': 'deployer' } },
      stringData: { note: 'x' },
    });
    // A token Secret of the virtual cluster, as it is.
    await e.virtual.create('/api/v1/namespaces/apps/serviceaccounts', { metadata: { name: 'deployer' } });
    await e.virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'token', annotations: { 'kubernetes.io/service-account.name': 'deployer' } },
      type: 'kubernetes.io/service-account-token',
    });
    const condition = await syncingWhen(
      e,
      'tokens',
      (c) => c.reason === 'SyncError' && c.message.includes('Secret apps/turned'),
      'the patched Secret reported as failing',
    );
    expect(condition.message).toContain('RestrictedFieldPatched');
    expect(condition.message).toContain('sync.toHost.secrets.patches[0].expression');
    let events: any[] = [];
    await eventually(
      async () => {
        events = await virtualEventsAbout(e, 'apps', 'Secret', 'turned');
        return events.some((ev) => ev.reason === 'SyncError' && ev.note?.includes('RestrictedFieldPatched'));
      },
      30_000,
      'a SyncError event on the virtual Secret',
    );
    expect(events.find((ev) => ev.reason === 'SyncError').note).toContain('RestrictedFieldPatched');
    // Nothing of either reached the host through 'tokens'; 'dev' (no patches) synced the Opaque
    // one without the reserved annotation, and no token Secret exists in her namespace.
    const names = (await e.admin.list(secrets(TEAM))).map((s: any) => s.metadata.name);
    expect(names).not.toContain(hostNameLong('turned', 'apps', 'tokens'));
    expect(names).not.toContain(hostNameLong('token', 'apps', 'tokens'));
    expect(names).not.toContain(hostNameLong('token', 'apps', 'dev'));
    const devCopy = `${secrets(TEAM)}/${hostNameLong('turned', 'apps', 'dev')}`;
    await eventually(
      async () => (await e.admin.get(devCopy)) !== null,
      60_000,
      "dev's copy of the Opaque Secret",
    );
    const copy = await e.admin.get(devCopy);
    expect(copy.type).toBe('Opaque');
    expect(copy.metadata.annotations ?? {}).not.toHaveProperty('kubernetes.io/service-account.name');
    expect(
      (await e.admin.list(secrets(TEAM))).filter(
        (s: any) => s.type === 'kubernetes.io/service-account-token',
      ),
    ).toEqual([]);
  });
});
