import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { RestClientMetrics } from '../../src/runtime/rest-client-metrics.ts';
import { SyncerMetrics } from '../../src/sync/controllers/metrics.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { eventually } from '../support/wait.ts';
import { docPath, runDocExamples } from './runner.ts';

/**
 * docs/metrics.md is the complete and exact reference of the metrics:
 *
 * - every metric class of the code, built on a fresh prom-client Registry, has exactly the names,
 *   types and label names of the page's table, and the table has no other metric;
 * - no other metric is defined anywhere in src/ (every `new Counter|Gauge|Histogram|Summary`);
 * - a real `platform operator` (bin/platform.js, with webhooks and gateway, against a
 *   kube-apiserver of its own) serves on its health port exactly the operator metrics of the
 *   table, and on its gateway port exactly the gateway metrics; the page's commands run against it.
 */

interface DocumentedMetric {
  readonly name: string;
  readonly type: string;
  readonly labels: readonly string[];
  readonly where: readonly string[];
}

/** The rows of the page's reference table. */
function documentedMetrics(): DocumentedMetric[] {
  const text = readFileSync(docPath('metrics.md'), 'utf8');
  const reference = text.slice(text.indexOf('## Reference'));
  const rows: DocumentedMetric[] = [];
  for (const line of reference.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    // | `name` | type | `a`, `b` | where | meaning |
    const name = /^`([a-z_:][a-z0-9_:]*)`$/.exec(cells[1] ?? '')?.[1];
    if (!name) continue;
    rows.push({
      name,
      type: cells[2] ?? '',
      labels: [...(cells[3] ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1]!),
      where: (cells[4] ?? '').split(',').map((where) => where.trim()),
    });
  }
  return rows;
}

interface RegisteredMetric {
  readonly name: string;
  readonly type: string;
  readonly labels: readonly string[];
}

async function registered(registry: Registry): Promise<RegisteredMetric[]> {
  return (await registry.getMetricsAsJSON()).map((metric) => ({
    name: metric.name,
    type: String(metric.type),
    labels: [
      ...((registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] }).labelNames ?? []),
    ],
  }));
}

/** Metrics of each endpoint, from the classes that define them. */
async function metricsOfTheCode() {
  const runtime = new Registry();
  new RuntimeMetrics(runtime);
  RestClientMetrics.for(runtime);
  const gateway = new Registry();
  new GatewayMetrics(gateway);
  const syncer = new Registry();
  SyncerMetrics.for(syncer);
  return {
    runtime: await registered(runtime),
    gateway: await registered(gateway),
    syncer: await registered(syncer),
  };
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') && !path.endsWith('.test.ts') ? [path] : [];
  });
}

/** `# TYPE <name> <type>` lines of a scrape. */
async function scrape(url: string): Promise<Map<string, string>> {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  const types = new Map<string, string>();
  for (const match of (await response.text()).matchAll(/^# TYPE (\S+) (\S+)$/gm))
    types.set(match[1]!, match[2]!);
  return types;
}

describe('docs/metrics.md: the reference table', () => {
  test('lists exactly the metrics of the code, with their types and label names', async () => {
    const documented = documentedMetrics();
    const code = await metricsOfTheCode();
    const all = [...code.runtime, ...code.gateway, ...code.syncer];
    expect(documented.map((m) => m.name).sort(), 'documented vs. defined metric names').toEqual(
      all.map((m) => m.name).sort(),
    );
    expect(new Set(documented.map((m) => m.name)).size, 'a metric documented twice').toBe(documented.length);
    const byName = new Map(documented.map((m) => [m.name, m]));
    const where = (metric: RegisteredMetric, expected: string[]) => {
      const doc = byName.get(metric.name)!;
      expect({ name: doc.name, type: doc.type, labels: doc.labels, where: doc.where }).toEqual({
        name: metric.name,
        type: metric.type,
        labels: metric.labels,
        where: expected,
      });
    };
    for (const metric of code.runtime) where(metric, ['operator', 'syncer']);
    for (const metric of code.gateway) where(metric, ['gateway']);
    for (const metric of code.syncer) where(metric, ['syncer']);
  });

  test('no metric is defined anywhere else in src/', () => {
    const defined: string[] = [];
    for (const file of sourceFiles(join(repoRoot, 'src'))) {
      const text = readFileSync(file, 'utf8');
      expect(text, `${file}: default process metrics would need documenting`).not.toMatch(
        /collectDefaultMetrics/,
      );
      for (const match of text.matchAll(
        /new (?:Counter|Gauge|Histogram|Summary)(?:<[^>]*>)?\(\s*\{\s*name:\s*'([^']+)'/g,
      ))
        defined.push(match[1]!);
      const constructors = (text.match(/new (?:Counter|Gauge|Histogram|Summary)\b/g) ?? []).length;
      const named = [
        ...text.matchAll(/new (?:Counter|Gauge|Histogram|Summary)(?:<[^>]*>)?\(\s*\{\s*name:\s*'/g),
      ].length;
      expect(named, `${file}: a metric whose name this test cannot read (name: '...' first)`).toBe(
        constructors,
      );
    }
    expect(defined.sort()).toEqual(
      documentedMetrics()
        .map((m) => m.name)
        .sort(),
    );
  });
});

describe('a running platform operator', () => {
  const startCluster = useExtraClusters();
  let operator: ChildProcess | undefined;
  let output = '';
  const ports = { health: 0, gateway: 0, webhook: 0 };

  beforeAll(async () => {
    const cluster = await startCluster({ name: uniqueName('doc-metrics') });
    const kc = kubeConfigFor(cluster);
    await installCrds(kc);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'platform-system' } } });
    ports.health = await freePort();
    ports.gateway = await freePort();
    ports.webhook = await freePort();
    operator = spawn(
      process.execPath,
      [
        '--no-node-snapshot',
        join(repoRoot, 'bin', 'platform.js'),
        'operator',
        `--kubeconfig=${cluster.kubeconfigPath}`,
        '--namespace=platform-system',
        '--identity=doc-metrics',
        '--log-level=warn',
        '--health-host=127.0.0.1',
        `--health-port=${ports.health}`,
        '--webhook-host=127.0.0.1',
        `--webhook-port=${ports.webhook}`,
        '--webhook-endpoint=local',
        '--gateway-host=127.0.0.1',
        `--gateway-port=${ports.gateway}`,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
    };
    operator.stdout?.on('data', keep);
    operator.stderr?.on('data', keep);
    await eventually(
      async () => {
        if (operator?.exitCode !== null) throw new Error(`platform operator exited: ${output}`);
        const ready = await Promise.all(
          [`http://127.0.0.1:${ports.health}/readyz`, `http://127.0.0.1:${ports.gateway}/readyz`].map((url) =>
            fetch(url).then(
              (response) => response.status === 200,
              () => false,
            ),
          ),
        );
        return ready.every(Boolean);
      },
      120_000,
      'platform operator ready',
    );
  }, 180_000);

  afterAll(async () => {
    if (operator && operator.exitCode === null) {
      const exited = new Promise((resolve) => operator?.once('exit', resolve));
      operator.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
      if (operator.exitCode === null) operator.kill('SIGKILL');
    }
  });

  runDocExamples('metrics.md', {
    env: () => ({
      OPERATOR_URL: `http://127.0.0.1:${ports.health}`,
      PLATFORM_URL: `http://127.0.0.1:${ports.gateway}`,
    }),
  });

  test('serves exactly the documented operator and gateway metrics, on the health port only', async () => {
    const documented = documentedMetrics();
    const operatorMetrics = await scrape(`http://127.0.0.1:${ports.health}/metrics`);
    const expected = (place: string) =>
      new Map(documented.filter((m) => m.where.includes(place)).map((m) => [m.name, m.type]));
    // The syncer metrics join the operator's once it runs a syncer; it runs none here.
    expect(operatorMetrics).toEqual(
      new Map(
        [...expected('operator'), ...expected('gateway')].filter(
          ([name]) => !name.startsWith('platform_syncer_'),
        ),
      ),
    );
    // Not on the API port, where an ingress would publish them (under the API's base path an
    // unknown path needs a key first, as on kube-apiserver).
    expect((await fetch(`http://127.0.0.1:${ports.gateway}/metrics`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${ports.gateway}/kubernetes/management/metrics`)).status).toBe(401);
  });
});
