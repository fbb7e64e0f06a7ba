import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { controllerCommand } from '../../src/cli/controller.ts';
import { gatewayCommand } from '../../src/cli/gateway.ts';
import { webhookCommand } from '../../src/cli/webhook.ts';
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

  test('installs on Kubernetes 1.31 or newer only (docs/install-helm.md: selectable fields)', async () => {
    const onVersion = (version: string) =>
      helm(['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--kube-version', version]);
    expect((await onVersion('1.31.0')).code).toBe(0);
    const older = await onVersion('1.30.9');
    expect(older.code).not.toBe(0);
    expect(older.stderr).toMatch(/kubeVersion/);
  });

  test('values.schema.json rejects bad values', async () => {
    const bad: Array<[string[], RegExp]> = [
      [['--set', 'controller.replicas=-1'], /\/controller\/replicas/],
      [['--set', 'gateway.replicas=two'], /\/gateway\/replicas/],
      [['--set', 'image.pullPolicy=Sometimes'], /\/image\/pullPolicy/],
      [['--set', 'webhook.certificates.mode=vault'], /\/webhook\/certificates\/mode/],
      [['--set', 'webhook.url=http://127.0.0.1:9443'], /\/webhook\/url/],
      [['--set', 'gateway.tls.mode=cert-manager'], /\/gateway\/tls/],
      [['--set', 'gateway.tls.mode=secret'], /\/gateway\/tls/],
      [['--set', 'platformNamespace=Not_A_Namespace'], /\/platformNamespace/],
      [['--set', 'controller.disableControllers={gateway}'], /\/controller\/disableControllers/],
      [['--set', 'operator.logLevel=info'], /additional properties 'operator'/],
      [['--set', 'rbac.projectClusterRoles={cluster-admin}'], /\/rbac\/projectClusterRoles/],
      [['--set', 'replica=2'], /additional properties 'replica'/],
    ];
    for (const [args, path] of bad) {
      const result = await helm(['lint', CHART_DIR, ...args]);
      expect(result.code, `helm lint ${args.join(' ')} should fail`).not.toBe(0);
      expect(result.stdout + result.stderr, args.join(' ')).toMatch(path);
    }
    // Checks the schema cannot express, made by the templates.
    const single = await helm(['template', CHART_DIR, '--set', 'controller.leaderElection.enabled=false']);
    expect(single.code).not.toBe(0);
    expect(single.stderr).toContain('needs controller.replicas=1');
    expect(
      (
        await helm([
          'template',
          CHART_DIR,
          '--set',
          'controller.leaderElection.enabled=false',
          '--set',
          'controller.replicas=1',
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

  test('one Deployment per component, each running its `platform` command with flags it knows, as its own ServiceAccount, on the image the Dockerfile builds', async () => {
    const commands = {
      controller: controllerCommand(),
      webhook: webhookCommand(),
      gateway: gatewayCommand(),
    };
    for (const values of [
      {},
      FULL_VALUES,
      { gateway: { enabled: false }, webhook: { url: 'https://x.test' } },
    ]) {
      const manifests = await renderChart({ values });
      const deployments = manifests.filter((m) => m.kind === 'Deployment');
      const gatewayOn = (values as { gateway?: { enabled?: boolean } }).gateway?.enabled !== false;
      expect(deployments.map((d) => d.metadata.labels?.['app.kubernetes.io/component']).sort()).toEqual(
        gatewayOn ? ['controller', 'gateway', 'webhook'] : ['controller', 'webhook'],
      );
      const accounts = new Set<string>();
      for (const deployment of deployments) {
        const component = deployment.metadata.labels?.[
          'app.kubernetes.io/component'
        ] as keyof typeof commands;
        const pod = deployment.spec.template.spec;
        const container = pod.containers[0];
        // The controller's young generation is capped (its peak memory: docs/adr/0027); the others run on V8's defaults.
        const nodeFlags = component === 'controller' ? ['--max-semi-space-size=2'] : [];
        expect(container.command).toEqual([
          'node',
          '--no-node-snapshot',
          ...nodeFlags,
          '/app/bin/platform.js',
        ]);
        expect(container.args[0]).toBe(component);
        const known = new Set(commands[component].options.map((option) => option.long));
        for (const arg of container.args.slice(1) as string[]) {
          expect(known, `${arg} is not a flag of platform ${component}`).toContain(arg.split('=')[0]);
        }
        expect(pod.serviceAccountName).toBe(`${RELEASE}-${component}`);
        accounts.add(pod.serviceAccountName);
        expect(find(manifests, 'ServiceAccount', pod.serviceAccountName)).toBeDefined();
        expect(container.securityContext).toMatchObject({
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
        });
        expect(pod.securityContext).toMatchObject({ runAsNonRoot: true });
        if (component === 'gateway') {
          // The OpenID provider listens on a Unix socket under /tmp: writable despite the read-only root.
          const tmp = (container.volumeMounts ?? []).find(
            (mount: { mountPath: string }) => mount.mountPath === '/tmp',
          );
          expect(tmp).toBeDefined();
          expect(tmp?.readOnly).not.toBe(true);
          expect(
            pod.volumes.find((volume: { name: string }) => volume.name === tmp?.name)?.emptyDir,
          ).toBeDefined();
        }
      }
      expect(accounts.size, 'no two components share a ServiceAccount').toBe(deployments.length);
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
    // The image's entrypoint is the `platform` command the Deployments run (docs/README.md).
    expect(dockerfile).toMatch(/^ENTRYPOINT \["node", "--no-node-snapshot", "\/app\/bin\/platform\.js"\]$/m);
  });

  test("the gateway's --issuer-url: gateway.externalURL, else the ingress host over HTTPS, else none (docs/trust.md, the `iss` claim)", async () => {
    const issuerArgs = async (values: Record<string, unknown>) => {
      const gateway = find(await renderChart({ values }), 'Deployment', `${RELEASE}-gateway`);
      return (gateway.spec.template.spec.containers[0].args as string[]).filter((arg) =>
        arg.startsWith('--issuer-url'),
      );
    };
    expect(await issuerArgs({})).toEqual([]);
    expect(
      await issuerArgs({ gateway: { ingress: { enabled: true, host: 'platform.example.test' } } }),
    ).toEqual(['--issuer-url=https://platform.example.test']);
    expect(
      await issuerArgs({
        gateway: {
          externalURL: 'https://platform.example.com/',
          ingress: { enabled: true, host: 'platform.example.test' },
        },
      }),
    ).toEqual(['--issuer-url=https://platform.example.com']);
  });

  test('grants the group platform:admins nothing: no binding names it (docs/security.md, docs/install-helm.md)', async () => {
    for (const values of [{}, FULL_VALUES]) {
      const bindings = (await renderChart({ values })).filter((m) =>
        ['RoleBinding', 'ClusterRoleBinding'].includes(m.kind),
      );
      expect(bindings.length).toBeGreaterThan(0);
      const naming = bindings.filter((binding) =>
        (binding.subjects ?? []).some((subject: { name?: string }) => subject.name === 'platform:admins'),
      );
      expect(naming.map((binding) => binding.metadata.name)).toEqual([]);
    }
  });

  test('rollouts never go below the replica count; the gateway Service is ClusterIP on 80, or 443 with TLS (docs/install-helm.md)', async () => {
    const defaults = await renderChart();
    for (const deployment of defaults.filter((m) => m.kind === 'Deployment'))
      expect(deployment.spec.strategy.rollingUpdate, deployment.metadata.name).toMatchObject({
        maxUnavailable: 0,
      });
    const gatewayService = (manifests: Manifest[]) => find(manifests, 'Service', `${RELEASE}-gateway`).spec;
    expect(gatewayService(defaults)).toMatchObject({
      type: 'ClusterIP',
      ports: [{ name: 'http', port: 80 }],
    });
    expect(gatewayService(await renderChart({ values: FULL_VALUES }))).toMatchObject({
      ports: [{ name: 'https', port: 443 }],
    });
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
    // cert-manager issues the webhook certificate, so the webhook needs no write on its Secret.
    const role = find(full, 'Role', `${RELEASE}-webhook`);
    expect((role.rules as Array<{ verbs: string[] }>).flatMap((rule) => rule.verbs)).not.toContain('update');
    const config = await renderChart({ values: { config: { values: { projectNamespacePrefix: 'team-' } } } });
    expect(find(config, 'Secret', 'platform-config').stringData.config).toBe(
      'projectNamespacePrefix: team-\n',
    );
    expect(full.filter((m) => m.kind === 'PodDisruptionBudget')).toHaveLength(3);
    const single = await renderChart({
      values: { controller: { replicas: 1 }, webhook: { replicas: 1 }, gateway: { replicas: 1 } },
    });
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
        for (const component of ['controller', 'webhook', 'gateway'])
          expect(result.stdout).toContain(`deployment.apps/platform-${component} created (server dry run)`);
      }
    });
  });
});
