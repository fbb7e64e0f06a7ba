// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { INSTANCE_UID_LABEL, PROJECT_LABEL } from '../../src/api/labels.ts';
import { ANNOTATION_OBJECT_NAME, LABEL_MANAGED_BY } from '../../src/sync/names.ts';
import { eventually } from '../support/wait.ts';
import { b64, createInstanceAsMallory, MP, syncingWhen, TEAM, useTenantPlatform } from './support.ts';

/**
 * docs/security.md, "What remains": a syncer whose namespace mappings name several host
 * namespaces watches the host cluster-wide (one label-selected watch per kind), which its
 * identity (RoleBindings in those namespaces only) does not allow. It is bound in every mapped
 * namespace, starts, and never gets its host caches: the refused list is logged, `Syncing` stays
 * Unknown `Starting` waiting for them, and nothing is copied. The instance `dev` of the same
 * project, mapping nothing, is the control: it syncs (the environment waits for it) and copies a
 * Secret made after the several-namespace syncer started.
 */
describe('a syncer whose namespace mappings name several host namespaces', () => {
  const env = useTenantPlatform();

  test('is bound in each, but its cluster-wide host list is refused: it never becomes ready and copies nothing', async () => {
    const { admin, virtual } = env();
    const extra = `${TEAM}-extra`;
    // A second namespace of mallory's project (a cluster admin labels it so), so that
    // admission lets her mapping name it.
    await admin.create('/api/v1/namespaces', {
      metadata: { name: extra, labels: { [PROJECT_LABEL]: 'team' } },
    });
    await virtual.create('/api/v1/namespaces', { metadata: { name: 'spread-apps' } });
    await virtual.create('/api/v1/namespaces/spread-apps/secrets', {
      metadata: { name: 'spread-check' },
      data: { a: b64('1') },
    });
    const config = {
      sync: {
        toHost: {
          secrets: { enabled: true },
          namespaces: { enabled: true, mappings: { byName: { 'spread-apps': extra } } },
        },
      },
    };
    // The webhook learns the new namespace's project from its cache: admitted once it has.
    await eventually(
      async () => (await createInstanceAsMallory(env(), 'spread', config)).status === 201,
      60_000,
      'the several-namespace instance to be admitted',
    );
    const instance = await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/spread`);

    // Its identity is bound in both namespaces: what stops it is the cluster-wide list.
    for (const namespace of [TEAM, extra]) {
      await eventually(
        async () =>
          (
            await admin.list(
              `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
              `${INSTANCE_UID_LABEL}=${instance.metadata.uid}`,
            )
          ).length > 0,
        60_000,
        `the syncer's RoleBinding in ${namespace}`,
      );
    }

    // Its virtual caches fill (the virtual cluster's lists are allowed); its host caches never do.
    const hostCachesOnly = 'waiting for the caches: host services, host endpoints, host secrets';
    await syncingWhen(
      env(),
      'spread',
      (c) => c.status === 'Unknown' && c.reason === 'Starting' && c.message === hostCachesOnly,
      'the several-namespace syncer to start and wait for its host caches only',
    );

    // The refused list is in the log: the host Secrets of this syncer, listed with no namespace.
    const refusedLists = () =>
      env()
        .logs()
        .split('\n')
        .filter((line) => line.includes('list/watch failed'))
        .map((line) => JSON.parse(line))
        .filter(
          (entry: any) =>
            /^v1\/(services|endpoints|secrets) labels=/.test(entry.informer) &&
            entry.informer.endsWith(`labels=${LABEL_MANAGED_BY}=spread`) &&
            /forbidden/i.test(JSON.stringify(entry.err)),
        );
    await eventually(async () => refusedLists().length > 0, 60_000, 'the refused host list in the log');

    // The control: the project's single-namespace syncer copies a Secret made now.
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'control-check' },
      data: { a: b64('1') },
    });
    await eventually(
      async () =>
        (await admin.list(`/api/v1/namespaces/${TEAM}/secrets`, `${LABEL_MANAGED_BY}=dev`)).some(
          (s: any) => s.metadata.annotations?.[ANNOTATION_OBJECT_NAME] === 'control-check',
        ),
      60_000,
      "the control syncer's copy",
    );

    // Meanwhile the several-namespace syncer is still waiting, and has copied nothing anywhere.
    const still = await syncingWhen(env(), 'spread', () => true, 'the condition');
    expect([still.status, still.reason, still.message]).toEqual(['Unknown', 'Starting', hostCachesOnly]);
    expect(refusedLists().length).toBeGreaterThan(0);
    expect(await admin.list('/api/v1/secrets', `${LABEL_MANAGED_BY}=spread`)).toEqual([]);
  });
});
