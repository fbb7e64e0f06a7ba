// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../../src/controllers/secretsync/desired.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { eventually } from '../support/wait.ts';
import {
  everythingVisible,
  leakForms,
  syncingWhen,
  useAttackEnv,
  VICTIM_NAMESPACE,
  VICTIM_SECRET,
} from './sync-support.ts';

/**
 * "Nothing from the virtual side sets reserved metadata on the host", attacked as a tenant who
 * owns a virtual cluster and a VirtualClusterInstance in its project would: labels that make the
 * secret-sync controller copy another tenant's SharedSecret, set on a virtual Secret and by a
 * whole-object patch; a Secret turned into a service-account token, by a patch on `type` and by
 * a whole-object patch, and a virtual token Secret as it is.
 */
describe('a tenant cannot steer host controllers through what its syncer writes', () => {
  const env = useAttackEnv();
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

  test("labels asking for another tenant's SharedSecret never reach the host; its value goes nowhere", async () => {
    const e = env();
    // The path the attack aims at works: a Secret so labelled by someone who may read the
    // SharedSecret (here the cluster admin, in a namespace no attacker reads) is filled.
    const control = await e.tenantNamespace('control');
    await e.host.create('secrets', control, {
      metadata: {
        name: 'copy',
        labels: { [SOURCE_NAME_LABEL]: VICTIM_SECRET, [SOURCE_NAMESPACE_LABEL]: VICTIM_NAMESPACE },
      },
    });
    await eventually(
      async () => (await e.host.get('secrets', control, 'copy'))?.data?.password === b64(e.secretValue),
      30_000,
      'the secret-sync controller to fill a legitimately labelled Secret',
    );

    const ns = await e.tenantNamespace('tenant');
    const reserved = { [SOURCE_NAME_LABEL]: VICTIM_SECRET, [SOURCE_NAMESPACE_LABEL]: VICTIM_NAMESPACE };
    await e.createInstance(ns, 'vc', {
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
    await syncingWhen(e, ns, 'vc', (c) => c.status === 'True', 'the syncer to run');
    await e.virtual.create('secrets', 'apps', {
      metadata: { name: 'stolen', labels: { ...reserved, app: 'db' } },
      stringData: { password: 'decoy' },
    });
    const hostName = hostNameLong('stolen', 'apps', 'vc');
    await eventually(
      async () => (await e.host.get('secrets', ns, hostName)) !== null,
      60_000,
      'the virtual Secret on the host',
    );
    const synced = await e.host.get('secrets', ns, hostName);
    // Synced (the syncer's write went through), without the labels.
    expect(synced.metadata.labels.app).toBe('db');
    expect(synced.metadata.labels[SOURCE_NAME_LABEL]).toBeUndefined();
    expect(synced.metadata.labels[SOURCE_NAMESPACE_LABEL]).toBeUndefined();
    expect(Buffer.from(synced.data.password, 'base64').toString()).toBe('decoy');
    // Give the secret-sync controller the time it took above to fill a labelled Secret.
    await new Promise((r) => setTimeout(r, 5000));
    const after = await e.host.get('secrets', ns, hostName);
    expect(Buffer.from(after.data.password, 'base64').toString()).toBe('decoy');
    const visible = await everythingVisible(e, [ns]);
    for (const form of leakForms(e.secretValue)) expect(visible).not.toContain(form);
  });

  test('a patch on type is refused at admission, with the field named', async () => {
    const e = env();
    const ns = await e.tenantNamespace('tenant');
    let refused: unknown;
    try {
      await e.createInstance(ns, 'typed', {
        sync: {
          toHost: {
            secrets: {
              enabled: true,
              patches: [{ path: 'type', expression: '"kubernetes.io/service-account-token"' }],
            },
          },
        },
      });
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ApiException);
    const status = JSON.parse(String((refused as ApiException<string>).body));
    expect(status.code).toBe(422);
    expect(status.details.causes).toContainEqual({
      field: 'spec.config',
      reason: 'FieldValueInvalid',
      message: 'sync.toHost.secrets.patches[0].path: "type" may not patch type',
    });
    expect(
      await e.custom
        .getNamespacedCustomObject({
          group: API_GROUP,
          version: API_VERSION,
          namespace: ns,
          plural: 'virtualclusterinstances',
          name: 'typed',
        })
        .then(
          () => 'stored',
          () => 'absent',
        ),
    ).toBe('absent');
  });

  test('no Secret becomes a service-account token on the host: not by a whole-object patch, not as it is', async () => {
    const e = env();
    const ns = await e.tenantNamespace('tenant');
    await e.host.create('serviceaccounts', ns, { metadata: { name: 'deployer' } });
    await e.createInstance(ns, 'tokens', {
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
    // Ready (the Secrets of the earlier tests fail under this patch too, so not necessarily True).
    await syncingWhen(e, ns, 'tokens', (c) => c.reason !== 'Starting', 'the syncer to run');
    // An Opaque Secret the patch would turn into a token Secret of the host's ServiceAccount.
    await e.virtual.create('secrets', 'apps', {
      metadata: { name: 'turned', annotations: { 'kubernetes.io/service-account.name': 'deployer' } },
      stringData: { note: 'x' },
    });
    // A token Secret of the virtual cluster, as it is.
    await e.virtual.create('serviceaccounts', 'apps', { metadata: { name: 'deployer' } });
    await e.virtual.create('secrets', 'apps', {
      metadata: { name: 'token', annotations: { 'kubernetes.io/service-account.name': 'deployer' } },
      type: 'kubernetes.io/service-account-token',
    });
    const condition = await syncingWhen(
      e,
      ns,
      'tokens',
      (c) => c.reason === 'SyncError' && c.message.includes('Secret apps/turned'),
      'the patched Secret reported as failing',
    );
    expect(condition.message).toContain('RestrictedFieldPatched');
    expect(condition.message).toContain('sync.toHost.secrets.patches[0].expression');
    const events = await eventually(
      async () =>
        (await e.virtual.eventsAbout('apps', 'Secret', 'turned')).some((ev) => ev.reason === 'SyncError'),
      30_000,
      'a SyncError event on the virtual Secret',
    ).then(() => e.virtual.eventsAbout('apps', 'Secret', 'turned'));
    expect(events.find((ev) => ev.reason === 'SyncError').note).toContain('RestrictedFieldPatched');
    // Nothing of either reached the host, and no token Secret exists there.
    const secrets = await e.host.list('secrets', ns);
    expect(secrets.map((s) => s.metadata.name)).not.toContain(hostNameLong('turned', 'apps', 'tokens'));
    expect(secrets.map((s) => s.metadata.name)).not.toContain(hostNameLong('token', 'apps', 'tokens'));
    expect(secrets.filter((s) => s.type === 'kubernetes.io/service-account-token')).toEqual([]);
  });
});
