import { ApiException, type CustomObjectsApi } from '@kubernetes/client-node';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';

/**
 * Waits until the apiserver calls our webhooks (it picks configurations up asynchronously):
 * a dry-run create that only our webhook refuses (an unknown verb, 422) is refused by it.
 * Free of vitest, so benchmarks use it too.
 */
export async function waitUntilWebhooksServe(custom: CustomObjectsApi): Promise<void> {
  for (;;) {
    const outcome = await custom
      .createNamespacedCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'sharedsecrets',
        namespace: 'default',
        dryRun: 'All',
        body: {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'SharedSecret',
          metadata: { name: 'probe' },
          spec: { access: [{ verbs: ['not-a-verb'] }] },
        },
      })
      .then(
        () => 'admitted',
        (err: unknown) => (err instanceof ApiException && err.code === 422 ? 'denied' : 'unavailable'),
      );
    if (outcome === 'denied') return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
