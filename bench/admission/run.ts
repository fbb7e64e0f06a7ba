/**
 * Admission latency: a SharedSecret create with our webhooks registered (validation: SAR-free
 * path, users/teams lookups, metadata rules) versus a ConfigMap create, which no webhook sees, in
 * the same run against the same apiserver. Creates alternate so both see the same conditions.
 *
 *   npx tsx bench/admission/run.ts [iterations]
 */
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { waitUntilWebhooksServe } from '../../e2e/support/webhooks-ready.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { startAdmissionWebhooks } from '../../src/webhooks/index.ts';
import { benchMode, quantile, reportFigure, withBenchCluster } from '../support.ts';

const smoke = benchMode() === 'smoke';
const iterations = Number(process.argv[2] ?? (smoke ? 20 : 500));
const WARMUP = smoke ? 5 : 50;

async function main(): Promise<void> {
  await withBenchCluster('admission', async (_cluster, kc) => {
    const core = kc.makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: 'platform-system' } } });
    const webhooks = await startAdmissionWebhooks({
      kubeConfig: kc,
      host: '127.0.0.1',
      port: 0,
      platformNamespace: 'platform-system',
      endpoint: 'local',
      certificates: { mode: 'self-managed' },
    });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const createSharedSecret = (i: number) =>
      custom.createNamespacedCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'sharedsecrets',
        namespace: 'default',
        body: {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'SharedSecret',
          metadata: { name: `ss-${i}` },
          spec: { data: { k: 'dg==' }, access: [{ verbs: ['get'], users: [] }] },
        },
      });
    const createConfigMap = (i: number) =>
      core.createNamespacedConfigMap({
        namespace: 'default',
        body: { metadata: { name: `cm-${i}` }, data: { k: 'v' } },
      });
    await waitUntilWebhooksServe(custom);
    const webhooked: number[] = [];
    const plain: number[] = [];
    for (let i = 0; i < WARMUP + iterations; i++) {
      let t = process.hrtime.bigint();
      await createSharedSecret(i);
      const a = Number(process.hrtime.bigint() - t) / 1e6;
      t = process.hrtime.bigint();
      await createConfigMap(i);
      const b = Number(process.hrtime.bigint() - t) / 1e6;
      if (i >= WARMUP) {
        webhooked.push(a);
        plain.push(b);
      }
    }
    webhooked.sort((x, y) => x - y);
    plain.sort((x, y) => x - y);
    const row = (label: string, xs: number[]) =>
      `${label.padEnd(34)} p50 ${quantile(xs, 0.5).toFixed(2).padStart(7)} ms   p99 ${quantile(xs, 0.99).toFixed(2).padStart(7)} ms`;
    console.log(
      `admission benchmark: ${iterations} creates each (after ${WARMUP} warm-up), one client, sequential`,
    );
    console.log(row('SharedSecret (webhooks registered)', webhooked));
    console.log(row('ConfigMap (no webhook, baseline)', plain));
    console.log(
      `added by admission                 p50 ${(quantile(webhooked, 0.5) - quantile(plain, 0.5)).toFixed(2).padStart(7)} ms   p99 ${(quantile(webhooked, 0.99) - quantile(plain, 0.99)).toFixed(2).padStart(7)} ms   (ratio p50 ${(quantile(webhooked, 0.5) / quantile(plain, 0.5)).toFixed(2)}x)`,
    );
    for (const q of [0.5, 0.99]) {
      const label = q === 0.5 ? 'p50' : 'p99';
      reportFigure({
        name: `admission: SharedSecret create ${label} (webhooks registered)`,
        value: quantile(webhooked, q),
        unit: 'ms',
        baseline: { name: `ConfigMap create ${label} (no webhook)`, value: quantile(plain, q), unit: 'ms' },
        ratio: quantile(webhooked, q) / quantile(plain, q),
      });
    }
    await webhooks.stop();
  });
}

await main();
