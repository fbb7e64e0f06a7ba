import { beforeAll, describe, expect, test } from 'vitest';
import { HELM_INSTALL_TIMEOUT_MS, helmBinary, renderChart } from '../support/helm.ts';

/**
 * docs/install-helm.md, `platformNamespace`: the platform's own objects live in the platform
 * namespace, the release namespace unless set; `createPlatformNamespace: true` renders that
 * namespace too (kept on uninstall, as it holds the configuration and the pepper). Rendered by
 * the pinned helm.
 */
describe('the chart: the platform namespace', () => {
  beforeAll(async () => {
    await helmBinary();
  }, HELM_INSTALL_TIMEOUT_MS);

  const namespaces = (manifests: Awaited<ReturnType<typeof renderChart>>) =>
    manifests.filter((m) => m.kind === 'Namespace');

  test('not rendered by default; with createPlatformNamespace, rendered and kept on uninstall', async () => {
    const values = { platformNamespace: 'platform-data' };
    expect(namespaces(await renderChart({ namespace: 'platform-system', values }))).toEqual([]);

    const created = namespaces(
      await renderChart({
        namespace: 'platform-system',
        values: { ...values, createPlatformNamespace: true },
      }),
    );
    expect(created.map((namespace) => namespace.metadata.name)).toEqual(['platform-data']);
    expect(created[0]?.metadata).toMatchObject({
      annotations: { 'helm.sh/resource-policy': 'keep' },
    });
  });

  test('the configuration Secret goes into the platform namespace, not the release’s', async () => {
    const manifests = await renderChart({
      namespace: 'platform-system',
      values: { platformNamespace: 'platform-data' },
    });
    const configuration = manifests.find((m) => m.kind === 'Secret' && m.metadata.name === 'platform-config');
    expect(configuration?.metadata.namespace).toBe('platform-data');
  });
});
