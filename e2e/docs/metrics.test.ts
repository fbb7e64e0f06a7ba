import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.ts';
import { RuntimeMetrics } from '../../src/runtime/metrics.ts';
import { RestClientMetrics } from '../../src/runtime/rest-client-metrics.ts';
import { SyncerMetrics } from '../../src/sync/controllers/metrics.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { find, type Manifest, renderChart } from '../support/helm.ts';
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

/**
 * The page's "Buckets:" sentence, histogram by histogram: the lowest and highest bucket of each
 * (and the factor between work-queue buckets). A histogram missing here fails the test, so a new
 * one cannot go undescribed.
 */
const DOCUMENTED_BUCKETS: Record<string, { lowest: number; highest: number; factor?: number }> = {
  // reconcile time as controller-runtime (5 ms to 60 s)
  controller_runtime_reconcile_time_seconds: { lowest: 0.005, highest: 60 },
  // work queue durations as client-go (10 ns to 10 s, factors of 10)
  workqueue_queue_duration_seconds: { lowest: 1e-8, highest: 10, factor: 10 },
  workqueue_work_duration_seconds: { lowest: 1e-8, highest: 10, factor: 10 },
  // apiserver requests and the rate limiter's wait as client-go (5 ms to 60 s)
  rest_client_request_duration_seconds: { lowest: 0.005, highest: 60 },
  rest_client_rate_limiter_duration_seconds: { lowest: 0.005, highest: 60 },
  // gateway and access-proxy latency as kube-apiserver (5 ms to 60 s)
  gateway_request_duration_seconds: { lowest: 0.005, highest: 60 },
  gateway_proxy_request_duration_seconds: { lowest: 0.005, highest: 60 },
};

describe('docs/metrics.md: histogram buckets', () => {
  test('every histogram has the buckets the page says', () => {
    const text = readFileSync(docPath('metrics.md'), 'utf8').replace(/\s+/g, ' ');
    expect(text).toContain(
      "Buckets: reconcile time as controller-runtime (5 ms to 60 s), work queue durations as client-go (10 ns to 10 s, factors of 10), apiserver requests and the rate limiter's wait as client-go (5 ms to 60 s), gateway and access-proxy latency as kube-apiserver (5 ms to 60 s).",
    );
    const registry = new Registry();
    new RuntimeMetrics(registry);
    RestClientMetrics.for(registry);
    new GatewayMetrics(registry);
    SyncerMetrics.for(registry);
    const histograms = registry
      .getMetricsAsArray()
      .filter((metric) => (metric as unknown as { upperBounds?: number[] }).upperBounds !== undefined);
    expect(histograms.map((metric) => metric.name).sort()).toEqual(Object.keys(DOCUMENTED_BUCKETS).sort());
    for (const metric of histograms) {
      const bounds = (metric as unknown as { upperBounds: number[] }).upperBounds;
      const documented = DOCUMENTED_BUCKETS[metric.name]!;
      expect(bounds[0], metric.name).toBeCloseTo(documented.lowest, 12);
      expect(bounds.at(-1), metric.name).toBeCloseTo(documented.highest, 12);
      if (documented.factor)
        for (let i = 1; i < bounds.length; i++)
          expect(bounds[i]! / bounds[i - 1]!, metric.name).toBeCloseTo(documented.factor, 9);
    }
  });
});

describe("docs/metrics.md: the endpoints' default ports", () => {
  test('the health port is 8081 for controller, gateway, webhook and operator, 8082 for syncer', async () => {
    const defaultOf = (command: string) =>
      new Promise<string>((resolve, reject) => {
        const child = spawn(
          process.execPath,
          ['--no-node-snapshot', join(repoRoot, 'bin', 'platform.js'), command, '--help'],
          {
            stdio: ['ignore', 'pipe', 'inherit'],
          },
        );
        let help = '';
        child.stdout?.on('data', (chunk: Buffer) => {
          help += chunk.toString();
        });
        child.once('error', reject);
        child.once('exit', () => {
          // commander wraps the description: the default follows --health-port within its entry.
          const entry = /--health-port <port>([\s\S]*?)\n {2}-/.exec(help)?.[1] ?? '';
          resolve(/\(default: (\d+)\)/.exec(entry)?.[1] ?? `no default in: ${help}`);
        });
      });
    const commands = ['controller', 'gateway', 'webhook', 'operator', 'syncer'];
    const defaults = await Promise.all(commands.map(defaultOf));
    expect(Object.fromEntries(commands.map((command, i) => [command, defaults[i]]))).toEqual({
      controller: '8081',
      gateway: '8081',
      webhook: '8081',
      operator: '8081',
      syncer: '8082',
    });
  }, 120_000);
});

describe("docs/metrics.md: the chart's metrics Service and ServiceMonitor", () => {
  test('platform-metrics selects the pods of every component on their health port; the ServiceMonitor scrapes it', async () => {
    const manifests = await renderChart({
      release: 'platform',
      values: { metrics: { serviceMonitor: { enabled: true } } },
    });
    const service = find(manifests, 'Service', 'platform-metrics') as Manifest & {
      spec: { selector: Record<string, string>; ports: { name: string; targetPort: string | number }[] };
    };
    const deployments = manifests.filter((m) => m.kind === 'Deployment') as (Manifest & {
      spec: {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { args?: string[]; ports?: { name: string; containerPort: number }[] }[] };
        };
      };
    })[];
    // One Deployment per component, each selected by the Service, its health port the Service's target.
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([
      'platform-controller',
      'platform-gateway',
      'platform-webhook',
    ]);
    expect(service.spec.ports).toEqual([expect.objectContaining({ name: 'metrics', targetPort: 'health' })]);
    for (const deployment of deployments) {
      expect(deployment.spec.template.metadata.labels, deployment.metadata.name).toMatchObject(
        service.spec.selector,
      );
      const [container] = deployment.spec.template.spec.containers;
      const health = container?.ports?.find((port) => port.name === 'health');
      expect(health, deployment.metadata.name).toBeDefined();
      expect(container?.args, deployment.metadata.name).toContain(`--health-port=${health?.containerPort}`);
    }
    const monitor = find(manifests, 'ServiceMonitor') as Manifest & {
      spec: {
        selector: { matchLabels: Record<string, string> };
        endpoints: { port: string; path: string }[];
      };
    };
    expect(service.metadata.labels).toMatchObject(monitor.spec.selector.matchLabels);
    expect(manifests.filter((m) => m.kind === 'Service' && m !== service)).not.toContainEqual(
      expect.objectContaining({
        metadata: expect.objectContaining({
          labels: expect.objectContaining(monitor.spec.selector.matchLabels),
        }),
      }),
    );
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
  });
});

/** The page's controller names (the `controller` and `name` label values): the operator's, the gateway's. */
function documentedControllers(): { operator: string[]; gateway: string[] } {
  const text = readFileSync(docPath('metrics.md'), 'utf8').replace(/\s+/g, ' ');
  const names = (list: string | undefined) =>
    [...(list ?? '').matchAll(/`([^`]+)`/g)].map((match) => match[1]!);
  return {
    operator: names(/the operator's controllers are (.*?); the gateway's/.exec(text)?.[1]),
    gateway: names(/the gateway's \([^)]*\) is (`[^`]+`)/.exec(text)?.[1]),
  };
}

/** The page's name of the webhook's certificate controller (self-managed certificates). */
function documentedWebhookController(): string {
  const text = readFileSync(docPath('metrics.md'), 'utf8').replace(/\s+/g, ' ');
  return /`platform webhook`'s is (`[^`]+`)/.exec(text)?.[1]?.replaceAll('`', '') ?? 'not on the page';
}

/** The name metrics.md gives the webhook's controller when its certificate is mounted (`--webhook-cert-dir`). */
function documentedMountedCertificateController(): string {
  const text = readFileSync(docPath('metrics.md'), 'utf8').replace(/\s+/g, ' ');
  return (
    /\(`([^`]+)`, the reload of a mounted one, with `--webhook-cert-dir`\)/.exec(text)?.[1] ??
    'not on the page'
  );
}

/** A `bin/platform.js <command>` process, its output kept for the failure message. */
interface PlatformProcess {
  readonly child: ChildProcess;
  output(): string;
}

function startPlatform(command: string, args: string[]): PlatformProcess {
  const child = spawn(
    process.execPath,
    ['--no-node-snapshot', join(repoRoot, 'bin', 'platform.js'), command, ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, output: () => output };
}

/** Resolves once every URL answers 200; fails at once when the process exits. */
async function untilReady(platform: PlatformProcess, urls: string[], what: string): Promise<void> {
  await eventually(
    async () => {
      if (platform.child.exitCode !== null) throw new Error(`${what} exited: ${platform.output()}`);
      const ready = await Promise.all(
        urls.map((url) =>
          fetch(url).then(
            (response) => response.status === 200,
            () => false,
          ),
        ),
      );
      return ready.every(Boolean);
    },
    120_000,
    `${what} ready`,
  );
}

async function stopPlatform(platform: PlatformProcess | undefined): Promise<void> {
  const child = platform?.child;
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

describe('a running platform operator, and a platform gateway alone', () => {
  const startCluster = useExtraClusters();
  let operator: PlatformProcess | undefined;
  let gateway: PlatformProcess | undefined;
  const ports = { health: 0, gateway: 0, webhook: 0, aloneHealth: 0, aloneGateway: 0 };

  beforeAll(async () => {
    const cluster = await startCluster({ name: uniqueName('doc-metrics') });
    const kc = kubeConfigFor(cluster);
    await installCrds(kc);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'platform-system' } } });
    for (const port of Object.keys(ports) as (keyof typeof ports)[]) ports[port] = await freePort();
    const common = [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      '--namespace=platform-system',
      '--log-level=warn',
      '--health-host=127.0.0.1',
      '--gateway-host=127.0.0.1',
    ];
    operator = startPlatform('operator', [
      ...common,
      '--identity=doc-metrics',
      `--health-port=${ports.health}`,
      '--webhook-host=127.0.0.1',
      `--webhook-port=${ports.webhook}`,
      '--webhook-endpoint=local',
      `--gateway-port=${ports.gateway}`,
    ]);
    gateway = startPlatform('gateway', [
      ...common,
      `--health-port=${ports.aloneHealth}`,
      `--gateway-port=${ports.aloneGateway}`,
    ]);
    await untilReady(
      operator,
      [`http://127.0.0.1:${ports.health}/readyz`, `http://127.0.0.1:${ports.gateway}/readyz`],
      'platform operator',
    );
    await untilReady(
      gateway,
      [`http://127.0.0.1:${ports.aloneHealth}/readyz`, `http://127.0.0.1:${ports.aloneGateway}/readyz`],
      'platform gateway',
    );
  }, 240_000);

  afterAll(async () => {
    await Promise.all([stopPlatform(operator), stopPlatform(gateway)]);
  });

  runDocExamples('metrics.md', {
    env: () => ({
      OPERATOR_URL: `http://127.0.0.1:${ports.health}`,
      PLATFORM_URL: `http://127.0.0.1:${ports.gateway}`,
    }),
  });

  /** The values of `label` in the series of `metric` a health port serves. */
  const labelValues = async (port: number, metric: string, label: string) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return [
      ...new Set(
        [...text.matchAll(new RegExp(`^${metric}\\{[^}]*\\b${label}="([^"]+)"`, 'gm'))].map(
          (match) => match[1]!,
        ),
      ),
    ].sort();
  };

  test("the controllers are the ones the page names, as `controller` label values: the operator's and the gateway's", async () => {
    const documented = documentedControllers();
    expect(documented.operator.length).toBeGreaterThan(0);
    expect(documented.gateway.length).toBeGreaterThan(0);
    // Set when a controller starts (once its informers synced), before any work.
    const operatorExpected = [...documented.operator, ...documented.gateway].sort();
    const gatewayExpected = [...documented.gateway].sort();
    const current = async () => ({
      operator: await labelValues(ports.health, 'controller_runtime_max_concurrent_reconciles', 'controller'),
      gateway: await labelValues(
        ports.aloneHealth,
        'controller_runtime_max_concurrent_reconciles',
        'controller',
      ),
    });
    const same = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);
    // Waits for the controllers to start; the assertion below shows what ran when it gives up.
    await eventually(
      async () => {
        const now = await current();
        return same(now.operator, operatorExpected) && same(now.gateway, gatewayExpected);
      },
      30_000,
      'the documented controllers to run',
    ).catch(() => {});
    expect(await current()).toEqual({ operator: operatorExpected, gateway: gatewayExpected });
  });

  test('a platform gateway alone serves the gateway metrics and those of its controller and apiserver client, on its health port only', async () => {
    const documented = documentedMetrics();
    const expected = new Map(
      documented
        .filter((m) => m.where.includes('operator') || m.where.includes('gateway'))
        .map((m) => [m.name, m.type]),
    );
    expect(await scrape(`http://127.0.0.1:${ports.aloneHealth}/metrics`)).toEqual(expected);
    expect((await fetch(`http://127.0.0.1:${ports.aloneGateway}/metrics`)).status).toBe(404);
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

describe('a platform webhook alone', () => {
  const startCluster = useExtraClusters();
  let webhook: PlatformProcess | undefined;
  let kubeconfigPath = '';
  const ports = { health: 0, webhook: 0 };

  beforeAll(async () => {
    // A cluster of its own: its webhook configurations would replace the operator's above.
    const cluster = await startCluster({ name: uniqueName('doc-metrics-webhook') });
    const kc = kubeConfigFor(cluster);
    kubeconfigPath = cluster.kubeconfigPath;
    await installCrds(kc);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: 'platform-system' } } });
    ports.health = await freePort();
    ports.webhook = await freePort();
    webhook = startPlatform('webhook', [
      `--kubeconfig=${cluster.kubeconfigPath}`,
      '--namespace=platform-system',
      '--log-level=warn',
      '--health-host=127.0.0.1',
      `--health-port=${ports.health}`,
      '--webhook-host=127.0.0.1',
      `--webhook-port=${ports.webhook}`,
      '--webhook-endpoint=local',
    ]);
    await untilReady(webhook, [`http://127.0.0.1:${ports.health}/readyz`], 'platform webhook');
  }, 240_000);

  afterAll(() => stopPlatform(webhook));

  /** The controllers whose series the page at `port` shows. */
  const controllersOn = async (port: number) => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return [...text.matchAll(/^controller_runtime_max_concurrent_reconciles\{controller="([^"]+)"\}/gm)].map(
      (match) => match[1],
    );
  };

  test('with a mounted certificate (--webhook-cert-dir), its one controller is the documented reload of the files', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'doc-metrics-webhook-cert-'));
    const ca = await createCertificateAuthority('doc-metrics-mounted-ca', 3600);
    const serving = await issueCertificate(ca, {
      commonName: 'localhost',
      dnsNames: ['localhost'],
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: 3600,
    });
    writeFileSync(join(directory, 'ca.crt'), ca.certPem);
    writeFileSync(join(directory, 'tls.crt'), serving.certPem);
    writeFileSync(join(directory, 'tls.key'), serving.keyPem);
    const mountedPorts = { health: await freePort(), webhook: await freePort() };
    // A second webhook on the same cluster: its configurations replace the first's, which no
    // test here needs (they read metrics only).
    const mounted = startPlatform('webhook', [
      `--kubeconfig=${kubeconfigPath}`,
      '--namespace=platform-system',
      '--log-level=warn',
      '--health-host=127.0.0.1',
      `--health-port=${mountedPorts.health}`,
      '--webhook-host=127.0.0.1',
      `--webhook-port=${mountedPorts.webhook}`,
      '--webhook-endpoint=local',
      `--webhook-cert-dir=${directory}`,
    ]);
    try {
      await untilReady(
        mounted,
        [`http://127.0.0.1:${mountedPorts.health}/readyz`],
        'platform webhook (mounted)',
      );
      await eventually(
        async () => (await controllersOn(mountedPorts.health)).length > 0,
        30_000,
        'the mounted webhook controller to run',
      );
      expect(documentedMountedCertificateController()).toBe('webhook-certificate-files');
      expect(await controllersOn(mountedPorts.health)).toEqual([documentedMountedCertificateController()]);
    } finally {
      await stopPlatform(mounted);
      rmSync(directory, { recursive: true, force: true });
    }
  });

  test('serves the controller and work-queue metrics of its certificate controller, nothing else', async () => {
    const documented = documentedMetrics();
    // The page: the controller and work-queue metrics, no rest_client_* (its client counts nothing).
    expect(await scrape(`http://127.0.0.1:${ports.health}/metrics`)).toEqual(
      new Map(
        documented
          .filter((m) => m.where.includes('operator') && !m.name.startsWith('rest_client_'))
          .map((m) => [m.name, m.type]),
      ),
    );
    // The controller's series appear once it runs (after its informer synced), a moment after /readyz.
    const controllers = () => controllersOn(ports.health);
    await eventually(async () => (await controllers()).length > 0, 30_000, 'the webhook controller to run');
    expect(await controllers()).toEqual([documentedWebhookController()]);
  });
});
