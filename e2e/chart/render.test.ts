import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { operatorCommand } from '../../src/cli/operator.ts';
import { repoRoot } from '../../src/dev/binaries.ts';
import { buildWebhookConfigurations, type WebhookEndpoint } from '../../src/webhooks/configurations.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { kindOnlyCrd } from '../support/crds.ts';
import {
  CHART_DIR,
  find,
  HELM_INSTALL_TIMEOUT_MS,
  helm,
  helmBinary,
  helmWithValues,
  type Manifest,
  renderChart,
  templateChart,
} from '../support/helm.ts';
import { chartCrdFiles, FULL_VALUES, installChartCrds, kubectlOk, NAMESPACE, RELEASE } from './support.ts';

/**
 * The chart as files: lint, the values schema, and that what it renders matches what the
 * operator itself builds and runs with (webhook configurations, CRDs, flags, image). Then the
 * rendered manifests against a real apiserver (server-side dry run).
 */
describe('the Helm chart', () => {
  beforeAll(async () => {
    await helmBinary();
  }, HELM_INSTALL_TIMEOUT_MS);

  test('helm lint --strict is clean with the defaults and with every option on', async () => {
    for (const values of [{}, FULL_VALUES]) {
      const result = await helmWithValues(['lint', '--strict', CHART_DIR, '--namespace', NAMESPACE], values);
      expect(result.stderr + result.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
      expect(result.code, result.stdout + result.stderr).toBe(0);
    }
  });

  test('values.schema.json rejects bad values', async () => {
    const bad: Array<[string[], RegExp]> = [
      [['--set', 'replicas=-1'], /\/replicas/],
      [['--set', 'replicas=two'], /\/replicas/],
      [['--set', 'image.pullPolicy=Sometimes'], /\/image\/pullPolicy/],
      [['--set', 'webhook.certificates.mode=vault'], /\/webhook\/certificates\/mode/],
      [['--set', 'webhook.url=http://127.0.0.1:9443'], /\/webhook\/url/],
      [['--set', 'gateway.tls.mode=cert-manager'], /\/gateway\/tls/],
      [['--set', 'gateway.tls.mode=secret'], /\/gateway\/tls/],
      [['--set', 'platformNamespace=Not_A_Namespace'], /\/platformNamespace/],
      [['--set', 'operator.disableControllers={gateway}'], /\/operator\/disableControllers/],
      [['--set', 'rbac.projectClusterRoles={cluster-admin}'], /\/rbac\/projectClusterRoles/],
      [['--set', 'replica=2'], /additional properties 'replica'/],
    ];
    for (const [args, path] of bad) {
      const result = await helm(['lint', CHART_DIR, ...args]);
      expect(result.code, `helm lint ${args.join(' ')} should fail`).not.toBe(0);
      expect(result.stdout + result.stderr, args.join(' ')).toMatch(path);
    }
    // Checks the schema cannot express, made by the templates.
    const single = await helm(['template', CHART_DIR, '--set', 'operator.leaderElection.enabled=false']);
    expect(single.code).not.toBe(0);
    expect(single.stderr).toContain('needs replicas=1');
    expect(
      (
        await helm([
          'template',
          CHART_DIR,
          '--set',
          'operator.leaderElection.enabled=false',
          '--set',
          'replicas=1',
        ])
      ).code,
    ).toBe(0);
  });

  test('the webhook configurations are exactly the ones the operator applies', async () => {
    const cases: Array<[Record<string, unknown>, WebhookEndpoint]> = [
      [{}, { service: { namespace: NAMESPACE, name: `${RELEASE}-webhook` } }],
      [{ webhook: { url: 'https://127.0.0.1:9443' } }, { url: 'https://127.0.0.1:9443' }],
    ];
    for (const [values, endpoint] of cases) {
      const manifests = await renderChart({ values });
      const expected = buildWebhookConfigurations({
        endpoint,
        caBundlePem: '',
        platformNamespace: NAMESPACE,
      });
      for (const [kind, built] of [
        ['ValidatingWebhookConfiguration', expected.validating],
        ['MutatingWebhookConfiguration', expected.mutating],
      ] as const) {
        const rendered = find(manifests, kind);
        expect(rendered.metadata.name).toBe(built.metadata.name);
        expect(rendered.metadata.labels).toMatchObject(built.metadata.labels ?? {});
        // The operator adds the caBundle; everything else must be equal, or its server-side apply
        // and the chart would keep rewriting each other.
        const webhooks = (built.webhooks as Array<{ clientConfig: Record<string, unknown> }>).map((w) => {
          const { caBundle: _ignored, ...clientConfig } = w.clientConfig;
          return { ...w, clientConfig };
        });
        expect(rendered.webhooks).toEqual(webhooks);
      }
    }
  });

  test("the chart's CRDs are the generated ones (crds/, checked against src/api by a unit test)", () => {
    const generated = readdirSync(join(repoRoot, 'crds'))
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    const inChart = chartCrdFiles();
    const fix = 'copy them: cp crds/*.yaml charts/platform/crds/';
    expect([...inChart.keys()], fix).toEqual(generated);
    for (const [file, text] of inChart)
      expect(text, `${file}: ${fix}`).toBe(readFileSync(join(repoRoot, 'crds', file), 'utf8'));
  });

  test('the Deployment runs `platform operator` with flags it knows, on the image the Dockerfile builds', async () => {
    const known = new Set(operatorCommand().options.map((option) => option.long));
    for (const values of [
      {},
      FULL_VALUES,
      { gateway: { enabled: false }, webhook: { url: 'https://x.test' } },
    ]) {
      const deployment = find(await renderChart({ values }), 'Deployment');
      const container = deployment.spec.template.spec.containers[0];
      expect(container.command).toEqual(['node', '--no-node-snapshot', '/app/bin/platform.js']);
      expect(container.args[0]).toBe('operator');
      for (const arg of container.args.slice(1) as string[]) {
        expect(known, `${arg} is not a flag of platform operator`).toContain(arg.split('=')[0]);
      }
      expect(container.securityContext).toMatchObject({
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
      });
      expect(deployment.spec.template.spec.securityContext).toMatchObject({ runAsNonRoot: true });
    }
    const chart = readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8');
    const values = readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8');
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(chart).toContain(`appVersion: "${pkg.version}"`);
    const repository = /^\s+repository: (\S+)$/m.exec(values)?.[1];
    expect(repository).toBeDefined();
    const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain(`${repository}:`);
    expect(dockerfile).toContain('--no-node-snapshot');
  });

  test('optional parts render only when asked for', async () => {
    const kinds = (manifests: Manifest[]) => new Set(manifests.map((m) => m.kind));
    const defaults = await renderChart();
    expect(kinds(defaults)).not.toContain('ServiceMonitor');
    expect(kinds(defaults)).not.toContain('NetworkPolicy');
    expect(kinds(defaults)).not.toContain('Ingress');
    expect(kinds(defaults)).not.toContain('Certificate');
    expect(find(defaults, 'Secret', 'platform-config').stringData.config).toBe('{}\n');
    const full = await renderChart({ values: FULL_VALUES });
    for (const kind of [
      'ServiceMonitor',
      'NetworkPolicy',
      'Ingress',
      'Certificate',
      'Issuer',
      'PodDisruptionBudget',
    ])
      expect(kinds(full)).toContain(kind);
    expect(full.some((m) => m.kind === 'Secret' && m.metadata.name === 'platform-config')).toBe(false);
    // cert-manager issues the webhook certificate, so the operator needs no write on its Secret.
    const role = find(full, 'Role', `${RELEASE}-operator`);
    expect(JSON.stringify(role.rules)).not.toContain('platform-webhook-serving');
    const config = await renderChart({ values: { config: { values: { projectNamespacePrefix: 'team-' } } } });
    expect(find(config, 'Secret', 'platform-config').stringData.config).toBe(
      'projectNamespacePrefix: team-\n',
    );
    const single = await renderChart({ values: { replicas: 1 } });
    expect(kinds(single)).not.toContain('PodDisruptionBudget');
  });

  describe('against a real apiserver', () => {
    const startCluster = useExtraClusters();
    let kubeconfig: string;
    beforeAll(async () => {
      const cluster = await startCluster({ name: uniqueName('chart-render') });
      kubeconfig = cluster.kubeconfigPath;
      await installChartCrds(kubeconfig);
      // The kinds of optional parts whose operators are not installed here: minimal CRDs, so
      // that the apiserver checks at least kind, scope and metadata of those objects.
      await kubectlOk(
        kubeconfig,
        ['apply', '-f', '-'],
        [
          kindOnlyCrd('monitoring.coreos.com', 'ServiceMonitor', 'servicemonitors'),
          kindOnlyCrd('cert-manager.io', 'Certificate', 'certificates'),
          kindOnlyCrd('cert-manager.io', 'Issuer', 'issuers'),
        ]
          .map((crd) => stringify(crd))
          .join('---\n'),
      );
      await kubectlOk(kubeconfig, ['wait', '--for=condition=Established', 'crd', '--all', '--timeout=60s']);
      await kubectlOk(kubeconfig, ['create', 'namespace', NAMESPACE]);
    });

    test('kubectl apply --dry-run=server accepts helm template, defaults and every option', async () => {
      for (const values of [{}, FULL_VALUES]) {
        const manifests = await templateChart({ values, includeCrds: true });
        const result = await kubectlOk(kubeconfig, ['apply', '--dry-run=server', '-f', '-'], manifests);
        const applied = result.stdout.trim().split('\n');
        expect(applied.length).toBe((manifests.match(/^kind: /gm) ?? []).length);
        expect(result.stdout).toContain('deployment.apps/platform created (server dry run)');
      }
    });
  });
});
