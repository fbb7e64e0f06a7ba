// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects
import { describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { INSTANCE_UID_LABEL } from '../../src/api/labels.ts';
import { hostNameLong } from '../../src/sync/names.ts';
import { VALIDATING_CONFIGURATION_NAME } from '../../src/webhooks/configurations.ts';
import { eventually } from '../support/wait.ts';
import {
  b64,
  conditionOf,
  FINANCE,
  leaksOf,
  MP,
  settledWrites,
  TEAM,
  useTenantPlatform,
  V1,
} from './support.ts';

/**
 * Issue 15, item 2: "a tenant chooses where its syncer writes". Mallory points a
 * VirtualClusterInstance at namespaces that are not her project's (kube-system, finance's), at
 * every namespace at once (a mapping pattern), at another cluster, and at another instance's
 * placement. Admission refuses each with the field named; an instance that got past admission
 * anyway does not sync; and nothing is ever written where it pointed.
 */
describe("a project member cannot make a syncer write outside her project's namespaces", () => {
  const env = useTenantPlatform();
  const instance = (name: string, spec: Record<string, unknown>) => ({
    apiVersion: V1,
    kind: 'VirtualClusterInstance',
    metadata: { name },
    spec: {
      endpoint: env().virtualCluster.server,
      caData: b64(env().virtualCluster.caPem),
      credentialsSecretRef: { name: 'vc-creds' },
      config: stringify({ sync: { toHost: { secrets: { enabled: true } } } }),
      ...spec,
    },
  });
  const create = (body: unknown) =>
    env().mallory.call('POST', `${MP}/namespaces/${TEAM}/virtualclusterinstances`, { body });
  const causes = (answer: { body: any }) =>
    (answer.body?.details?.causes ?? []).map((c: any) => [c.field, c.message as string]);
  const clusterRef = (namespace: string, cluster = 'local', virtualCluster = 'x') => ({
    clusterRef: { cluster, namespace, virtualCluster },
  });

  /** Nothing of any syncer in these namespaces: no synced object, no syncer identity. */
  const nothingWrittenIn = async (namespaces: string[]) => {
    for (const namespace of namespaces) {
      for (const plural of ['services', 'endpoints', 'secrets', 'configmaps']) {
        const synced = await env().admin.list(
          `/api/v1/namespaces/${namespace}/${plural}`,
          'vcluster.platform/managed-by',
        );
        expect(synced, `${plural} a syncer wrote into ${namespace}`).toEqual([]);
      }
      for (const path of [
        `/api/v1/namespaces/${namespace}/serviceaccounts`,
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
      ])
        expect(await env().admin.list(path, INSTANCE_UID_LABEL), path).toEqual([]);
    }
  };

  test.each([
    ['kube-system', 'kube-system'],
    ["another project's namespace", FINANCE],
    ['a namespace that does not exist yet', 'p-later'],
  ])('a host namespace in %s is refused (422, spec.clusterRef.namespace)', async (_, namespace) => {
    const answer = await create(instance(`to-${namespace}`, clusterRef(namespace)));
    expect(answer.status).toBe(422);
    expect(causes(answer)).toEqual([['spec.clusterRef.namespace', expect.stringContaining(namespace)]]);
  });

  test('namespace mappings naming another namespace, or a pattern, are refused (422, spec.config)', async () => {
    const mapping = (byName: Record<string, string>) =>
      instance('mapped', {
        config: stringify({ sync: { toHost: { namespaces: { enabled: true, mappings: { byName } } } } }),
      });
    const toSystem = await create(mapping({ apps: 'kube-system' }));
    expect(toSystem.status).toBe(422);
    expect(causes(toSystem)).toEqual([
      [
        'spec.config',
        expect.stringMatching(/^sync\.toHost\.namespaces\.mappings\.byName\["apps"\]: .*kube-system/),
      ],
    ]);
    const everywhere = await create(mapping({ 'team-*': '*' }));
    expect(everywhere.status).toBe(422);
    expect(causes(everywhere)[0]).toEqual(['spec.config', expect.stringContaining('a pattern')]);
  });

  test('another cluster is refused (422, spec.clusterRef.cluster)', async () => {
    const answer = await create(instance('elsewhere', clusterRef(TEAM, 'prod')));
    expect(answer.status).toBe(422);
    expect(causes(answer)).toEqual([['spec.clusterRef.cluster', expect.stringContaining('not supported')]]);
  });

  test('moving an existing instance out of the project is refused too', async () => {
    const answer = await env().mallory.call('PATCH', `${MP}/namespaces/${TEAM}/virtualclusterinstances/dev`, {
      body: { spec: clusterRef('kube-system', 'local', 'dev') },
      contentType: 'application/merge-patch+json',
    });
    expect(answer.status).toBe(422);
    await nothingWrittenIn(['kube-system', FINANCE]);
  });

  test("a second instance under an existing instance's placement is refused it: no syncer, no identity, the host copies stay the first's", async () => {
    const { admin, virtual } = env();
    // `twin` names mallory's own virtual cluster `dev` in her own namespace: admission lets it
    // in (it is her project), but two syncers would take each other's host objects for their own
    // (twin would write Secrets differently: a patch).
    const twinConfig = stringify({
      sync: {
        toHost: { secrets: { enabled: true, patches: [{ path: 'data.a', expression: `"${b64('twin')}"` }] } },
      },
    });
    expect(
      (await create(instance('twin', { ...clusterRef(TEAM, 'local', 'dev'), config: twinConfig }))).status,
    ).toBe(201);
    await virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'twin-check' },
      data: { a: b64('1') },
    });
    const copy = `/api/v1/namespaces/${TEAM}/secrets/${hostNameLong('twin-check', 'apps', 'dev')}`;
    await eventually(async () => (await admin.get(copy)) !== null, 60_000, 'the host copy');
    const settled = await settledWrites(env(), ['secrets', 'services', 'endpoints', 'configmaps']);
    expect(settled, 'writes settle: one syncer per placement').toMatchObject({ settled: true });
    expect((await admin.get(copy)).data).toEqual({ a: b64('1') });
    expect(
      conditionOf(await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/twin`), 'Syncing'),
    ).toMatchObject({ status: 'False', reason: 'PlacementNotAllowed' });
    const twinAccounts = await admin.list(`/api/v1/namespaces/${TEAM}/serviceaccounts`);
    expect(twinAccounts.filter((sa: any) => sa.metadata.name.startsWith('vcluster-syncer-twin'))).toEqual([]);
    await admin.delete(`${MP}/namespaces/${TEAM}/virtualclusterinstances/twin`);
  });

  test('an instance that got past admission (created while the webhook was away) does not sync into kube-system', async () => {
    const { admin } = env();
    const path = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${VALIDATING_CONFIGURATION_NAME}`;
    const registered = await admin.ok('GET', path);
    await admin.delete(path);
    try {
      expect((await create(instance('sneaky', clusterRef('kube-system', 'local', 'sneaky')))).status).toBe(
        201,
      );
    } finally {
      const { metadata, ...rest } = registered;
      await admin.create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
        ...rest,
        metadata: { name: metadata.name, labels: metadata.labels },
      });
    }
    await eventually(
      async () => {
        const syncing = conditionOf(
          await admin.get(`${MP}/namespaces/${TEAM}/virtualclusterinstances/sneaky`),
          'Syncing',
        );
        return (
          syncing?.reason === 'PlacementNotAllowed' &&
          String(syncing.message).includes('spec.clusterRef.namespace')
        );
      },
      60_000,
      'the controller to refuse the placement',
    );
    await env().virtual.create('/api/v1/namespaces/apps/secrets', {
      metadata: { name: 'sneaky-check' },
      data: { a: b64('1') },
    });
    await settledWrites(env(), ['secrets']);
    await nothingWrittenIn(['kube-system', FINANCE]);
    expect(await leaksOf(env(), env().secret.value)).toEqual([]);
  });
});
