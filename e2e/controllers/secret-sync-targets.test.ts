import { beforeAll, describe, expect, test } from 'vitest';
import { DISABLE_SYNC_ANNOTATION } from '../../src/api/labels.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * docs/secret-sync.md, "What happens": which Secrets the secretsync controller fills, against a
 * kube-apiserver of its own with the platform's CRDs and admission and the controller running.
 * A Secret with one of the two labels is not a target; `management.platform/disable-sync: "true"`
 * pauses a target (its data is left as it is) until the annotation goes. A marker Secret, filled
 * after the others were written, shows the controller had its chance at them.
 */
describe('secret sync: which Secrets are filled', () => {
  const env = useGatewayEnv({ controllers: ['secretsync'] });
  const namespace = uniqueName('secret-sync');
  const NAME_LABEL = 'management.platform/sharedsecret-name';
  const NAMESPACE_LABEL = 'management.platform/sharedsecret-namespace';
  const both = () => ({ [NAME_LABEL]: 'source', [NAMESPACE_LABEL]: namespace });
  const MINE = { mine: Buffer.from('written by the owner').toString('base64') };

  const setSource = (data: Record<string, string>) =>
    env().custom.patchNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace,
      plural: 'sharedsecrets',
      name: 'source',
      body: [{ op: 'replace', path: '/spec/data', value: data }],
    });
  const secret = (name: string) => env().core.readNamespacedSecret({ namespace, name });
  const dataOf = async (name: string) => (await secret(name)).data ?? {};
  const managersOf = async (name: string) =>
    ((await secret(name)).metadata?.managedFields ?? []).map((entry) => entry.manager);
  /** Creates a fresh marker target and waits until it holds `data`. */
  const markerFilledWith = async (data: Record<string, string>) => {
    const name = uniqueName('marker');
    await env().core.createNamespacedSecret({ namespace, body: { metadata: { name, labels: both() } } });
    await eventually(
      async () => JSON.stringify(await dataOf(name)) === JSON.stringify(data),
      60_000,
      `the marker ${name} to be filled`,
    );
  };

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    await env().custom.createNamespacedCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      namespace,
      plural: 'sharedsecrets',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'SharedSecret',
        metadata: { name: 'source' },
        spec: { data: { token: 'dG9rZW4=' } },
      },
    });
  });

  test('a Secret with only one of the labels is not filled', async () => {
    for (const [name, labels] of [
      ['name-only', { [NAME_LABEL]: 'source' }],
      ['namespace-only', { [NAMESPACE_LABEL]: namespace }],
    ] as const)
      await env().core.createNamespacedSecret({
        namespace,
        body: { metadata: { name, labels }, data: MINE },
      });
    await markerFilledWith({ token: 'dG9rZW4=' });
    for (const name of ['name-only', 'namespace-only']) {
      expect(await dataOf(name), name).toEqual(MINE);
      expect(await managersOf(name), name).not.toContain('platform-secret-sync');
    }
  });

  test('disable-sync "true" leaves the data as it is, and the sync resumes when it goes', async () => {
    await env().core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: 'paused', labels: both(), annotations: { [DISABLE_SYNC_ANNOTATION]: 'true' } },
        data: MINE,
      },
    });
    await markerFilledWith({ token: 'dG9rZW4=' });
    expect(await dataOf('paused')).toEqual(MINE);

    await env().core.patchNamespacedSecret({
      namespace,
      name: 'paused',
      body: [{ op: 'remove', path: `/metadata/annotations/${DISABLE_SYNC_ANNOTATION.replace('/', '~1')}` }],
    });
    await eventually(
      async () => (await dataOf('paused')).token === 'dG9rZW4=',
      60_000,
      'the resumed Secret to be filled',
    );

    // Paused again (the annotations are gone with their only key: the whole map is added back).
    await env().core.patchNamespacedSecret({
      namespace,
      name: 'paused',
      body: [{ op: 'add', path: '/metadata/annotations', value: { [DISABLE_SYNC_ANNOTATION]: 'true' } }],
    });
    // A marker written after the annotation is filled only once the controller has seen both.
    await markerFilledWith({ token: 'dG9rZW4=' });
    const before = await dataOf('paused');
    await setSource({ token: 'bmV3LXRva2Vu' });
    await markerFilledWith({ token: 'bmV3LXRva2Vu' });
    expect(await dataOf('paused')).toEqual(before);
  });
});
