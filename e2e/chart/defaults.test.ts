import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import {
  CHART_DIR,
  find,
  HELM_INSTALL_TIMEOUT_MS,
  helmBinary,
  type Manifest,
  renderChart,
} from '../support/helm.ts';
import type { PolicyRule } from './rbac-support.ts';
import { RELEASE } from './support.ts';

/**
 * docs/install-helm.md's table of the important values, read off what the chart renders: each
 * default the table states, and what the values it names change. (e2e/chart/render.test.ts
 * covers the Service, the issuer URL, the optional parts and the schema.)
 */
describe('the chart: the defaults docs/install-helm.md states', () => {
  let defaults: Manifest[];
  beforeAll(async () => {
    await helmBinary();
    defaults = await renderChart();
  }, HELM_INSTALL_TIMEOUT_MS);

  const COMPONENTS = ['controller', 'webhook', 'gateway'] as const;
  const deployment = (manifests: Manifest[], component: string) =>
    find(manifests, 'Deployment', `${RELEASE}-${component}`);
  const container = (manifests: Manifest[], component: string) =>
    deployment(manifests, component).spec.template.spec.containers[0];

  test('two replicas of each component, each as the ServiceAccount <release>-<component>', () => {
    for (const component of COMPONENTS) {
      expect(deployment(defaults, component).spec.replicas, component).toBe(2);
      expect(deployment(defaults, component).spec.template.spec.serviceAccountName).toBe(
        `${RELEASE}-${component}`,
      );
    }
  });

  test('the image: the repository at the chart’s appVersion, or pinned by image.digest', async () => {
    const appVersion = /^appVersion: "([^"]+)"$/m.exec(
      readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8'),
    )?.[1];
    expect(appVersion).toBeDefined();
    for (const component of COMPONENTS)
      expect(container(defaults, component).image).toBe(`ghcr.io/cluster-platform/platform:${appVersion}`);
    const digest = `sha256:${'ab'.repeat(32)}`;
    const pinned = await renderChart({ values: { image: { digest } } });
    for (const component of COMPONENTS)
      expect(container(pinned, component).image).toBe(`ghcr.io/cluster-platform/platform@${digest}`);
  });

  test('webhook certificates: the operator’s own (no cert-manager object) unless mode is cert-manager', async () => {
    const kinds = new Set(defaults.map((manifest) => manifest.kind));
    expect(kinds).not.toContain('Certificate');
    expect(kinds).not.toContain('Issuer');
    const byCertManager = await renderChart({
      values: { webhook: { certificates: { mode: 'cert-manager' } } },
    });
    // No issuerRef: a self-signed CA of the chart's own issues the serving certificate.
    expect(byCertManager.filter((manifest) => manifest.kind === 'Certificate').length).toBeGreaterThan(0);
    expect(byCertManager.filter((manifest) => manifest.kind === 'Issuer').length).toBeGreaterThan(0);
  });

  test('gateway.enabled: the gateway is served by default, and not when false', async () => {
    expect(deployment(defaults, 'gateway')).toBeDefined();
    const off = await renderChart({ values: { gateway: { enabled: false } } });
    expect(
      off.some(
        (manifest) => manifest.kind === 'Deployment' && manifest.metadata.name === `${RELEASE}-gateway`,
      ),
    ).toBe(false);
  });

  test('audit: no volume by default; enabled, an emptyDir of 1Gi at /var/log/platform in each gateway pod', async () => {
    const auditVolume = (manifests: Manifest[]) =>
      (deployment(manifests, 'gateway').spec.template.spec.volumes ?? []).find(
        (volume: { name: string }) => volume.name === 'audit',
      );
    expect(auditVolume(defaults)).toBeUndefined();
    const audited = await renderChart({ values: { audit: { enabled: true } } });
    expect(auditVolume(audited)).toEqual({ name: 'audit', emptyDir: { sizeLimit: '1Gi' } });
    expect(container(audited, 'gateway').volumeMounts).toContainEqual(
      expect.objectContaining({ name: 'audit', mountPath: '/var/log/platform' }),
    );
  });

  test('a PodDisruptionBudget per component, minAvailable 1', () => {
    const budgets = defaults.filter((manifest) => manifest.kind === 'PodDisruptionBudget');
    expect(budgets.map((budget) => budget.metadata.name).sort()).toEqual(
      COMPONENTS.map((component) => `${RELEASE}-${component}`).sort(),
    );
    for (const budget of budgets) expect(budget.spec.minAvailable, budget.metadata.name).toBe(1);
  });

  test('rbac.projectClusterRoles: the three project roles, rendered by the chart', () => {
    const roles = defaults
      .filter((manifest) => manifest.kind === 'ClusterRole')
      .map((role) => role.metadata.name as string);
    for (const role of ['platform-project-admin', 'platform-project-user', 'platform-project-viewer'])
      expect(roles).toContain(role);
  });

  test('networkPolicy: per component only its own ports (webhook, gateway, health), each opened to whom its value names', async () => {
    expect(defaults.some((manifest) => manifest.kind === 'NetworkPolicy')).toBe(false);
    const from = (name: string) => [
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': name } } },
    ];
    const policies = await renderChart({
      values: {
        networkPolicy: {
          enabled: true,
          webhookFrom: from('apiserver'),
          gatewayFrom: from('ingress-nginx'),
          metricsFrom: from('monitoring'),
        },
      },
    });
    const expected = {
      controller: [{ port: 'health', from: from('monitoring') }],
      webhook: [
        { port: 'webhook', from: from('apiserver') },
        { port: 'health', from: from('monitoring') },
      ],
      gateway: [
        { port: 'gateway', from: from('ingress-nginx') },
        { port: 'health', from: from('monitoring') },
      ],
    };
    for (const component of COMPONENTS) {
      const policy = find(policies, 'NetworkPolicy', `${RELEASE}-${component}`);
      expect(policy.spec.podSelector.matchLabels['app.kubernetes.io/component']).toBe(component);
      expect(
        (policy.spec.ingress as Array<{ ports: Array<{ port: string }>; from?: unknown }>).map((rule) => ({
          port: rule.ports.map((port) => port.port).join(','),
          from: rule.from,
        })),
        component,
      ).toEqual(expected[component]);
      // The container's named ports are the ones the policy opens.
      const ports = (container(policies, component).ports as Array<{ name: string }>).map(
        (port) => port.name,
      );
      for (const rule of expected[component]) expect(ports, component).toContain(rule.port);
    }
  });

  test('metrics.serviceMonitor: one ServiceMonitor scraping /metrics of every replica of every component', async () => {
    const monitored = await renderChart({ values: { metrics: { serviceMonitor: { enabled: true } } } });
    const monitor = find(monitored, 'ServiceMonitor');
    expect(monitor.spec.endpoints).toEqual([expect.objectContaining({ port: 'metrics', path: '/metrics' })]);
    const service = monitored.find(
      (manifest) =>
        manifest.kind === 'Service' &&
        Object.entries(monitor.spec.selector.matchLabels).every(
          ([key, value]) => manifest.metadata.labels?.[key] === value,
        ),
    );
    expect(service, 'the Service the monitor selects').toBeDefined();
    // It selects the pods of all three components (no component label), on their health port.
    expect(service!.spec.selector['app.kubernetes.io/component']).toBeUndefined();
    for (const component of COMPONENTS) {
      const labels = deployment(monitored, component).spec.template.metadata.labels;
      for (const [key, value] of Object.entries(service!.spec.selector))
        expect(labels[key], component).toBe(value);
    }
    expect(service!.spec.ports).toEqual([expect.objectContaining({ name: 'metrics', targetPort: 'health' })]);
  });

  test('one installation per cluster: a second release in another namespace would take the same cluster-wide names', async () => {
    const clusterScoped = (manifests: Manifest[]) =>
      manifests
        .filter((manifest) => manifest.metadata.namespace === undefined)
        .map((m) => `${m.kind}/${m.metadata.name}`);
    const other = await renderChart({ release: 'second', namespace: 'elsewhere' });
    const shared = clusterScoped(defaults).filter((name) => clusterScoped(other).includes(name));
    expect(shared).toEqual(
      expect.arrayContaining([
        'ValidatingWebhookConfiguration/platform-validating-webhooks',
        'MutatingWebhookConfiguration/platform-mutating-webhooks',
        'ClusterRole/platform-project-admin',
        'ClusterRole/platform-project-user',
        'ClusterRole/platform-project-viewer',
      ]),
    );
    expect(
      shared.filter((name) => name.startsWith('ClusterRole/') && name.includes('syncer')).length,
    ).toBeGreaterThan(0);
    // The components' own cluster roles carry the release's name.
    expect(shared).not.toContain(`ClusterRole/${RELEASE}-controller`);
  });

  test('virtualClusters.provisioner: in-cluster, instances run from the chart’s image with its pull settings; none: no provisioner, none of its permissions', async () => {
    const args = (manifests: Manifest[]): string[] => container(manifests, 'controller').args;
    const grants = (manifests: Manifest[], group: string, resource: string) =>
      (find(manifests, 'ClusterRole', `${RELEASE}-controller`).rules as PolicyRule[]).some(
        (rule) => rule.apiGroups.includes(group) && rule.resources.includes(resource),
      );
    expect(args(defaults)).toEqual(
      expect.arrayContaining([
        '--provisioner=in-cluster',
        `--provisioner-image=${container(defaults, 'controller').image}`,
        '--provisioner-image-pull-policy=IfNotPresent',
      ]),
    );
    expect(grants(defaults, 'apps', 'statefulsets')).toBe(true);
    const pulled = await renderChart({
      values: { image: { pullPolicy: 'Always' }, imagePullSecrets: [{ name: 'a' }, { name: 'b' }] },
    });
    expect(args(pulled)).toEqual(
      expect.arrayContaining([
        '--provisioner-image-pull-policy=Always',
        '--provisioner-image-pull-secrets=a,b',
      ]),
    );
    const none = await renderChart({ values: { virtualClusters: { provisioner: 'none' } } });
    expect(args(none).filter((arg) => arg.startsWith('--provisioner'))).toEqual(['--provisioner=none']);
    for (const [group, resource] of [
      ['apps', 'statefulsets'],
      ['', 'services'],
      ['', 'persistentvolumeclaims'],
      ['management.platform', 'virtualclustertemplates'],
    ] as const)
      expect(grants(none, group, resource), `${group}/${resource}`).toBe(false);
  });

  test('resources: controller and gateway 100m / 256Mi requested, 1 CPU / 1Gi limit; webhook 50m / 128Mi, 1 CPU / 512Mi', () => {
    const expected = {
      controller: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
      gateway: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
      webhook: { requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } },
    };
    for (const component of COMPONENTS)
      expect(container(defaults, component).resources, component).toEqual(expected[component]);
  });
});
