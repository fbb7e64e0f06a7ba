import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type CommandResult, kubectl } from '../support/cluster.ts';
import { CHART_DIR } from '../support/helm.ts';

export const RELEASE = 'platform';
export const NAMESPACE = 'platform-system';

/** Values that turn every optional part of the chart on. */
export const FULL_VALUES = {
  replicas: 3,
  image: { tag: 'test', pullPolicy: 'Always' },
  webhook: { certificates: { mode: 'cert-manager' } },
  gateway: {
    tls: {
      mode: 'cert-manager',
      certManager: { issuerRef: { name: 'letsencrypt', kind: 'ClusterIssuer' } },
    },
    ingress: { enabled: true, className: 'nginx', host: 'platform.example.test' },
  },
  audit: { enabled: true, volume: { persistentVolumeClaim: { claimName: 'platform-audit' } } },
  metrics: { serviceMonitor: { enabled: true, labels: { release: 'prometheus' } } },
  podDisruptionBudget: { enabled: true, minAvailable: 2 },
  networkPolicy: {
    enabled: true,
    metricsFrom: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }],
    egress: [{ ports: [{ port: 443, protocol: 'TCP' }] }],
  },
  // The configuration Secret exists already (managed outside the chart).
  config: { create: false },
  operator: { disableControllers: ['virtualcluster'], maxConcurrentReconciles: 4, logLevel: 'debug' },
};

/** The chart's CRD files (its `crds/` folder), by file name. */
export function chartCrdFiles(): Map<string, string> {
  const dir = join(CHART_DIR, 'crds');
  return new Map(
    readdirSync(dir)
      .filter((f) => f.endsWith('.yaml'))
      .sort()
      .map((f) => [f, readFileSync(join(dir, f), 'utf8')]),
  );
}

/** kubectl on another cluster; throws with its stderr when it fails. */
export async function kubectlOk(kubeconfig: string, args: string[], stdin?: string): Promise<CommandResult> {
  const result = await kubectl(args, { kubeconfig, ...(stdin !== undefined ? { stdin } : {}) });
  if (result.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed: ${result.stderr}`);
  return result;
}

/** Installs the chart's CRDs (server-side apply, as `helm install` creates them) and waits until they are served. */
export async function installChartCrds(kubeconfig: string): Promise<void> {
  await kubectlOk(
    kubeconfig,
    ['apply', '--server-side', '--field-manager=helm', '-f', join(CHART_DIR, 'crds')],
    undefined,
  );
  await kubectlOk(kubeconfig, [
    'wait',
    '--for=condition=Established',
    'crd',
    '-l',
    'app.kubernetes.io/part-of=platform',
    '--timeout=60s',
  ]);
}
