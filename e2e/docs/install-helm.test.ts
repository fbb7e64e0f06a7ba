import { join } from 'node:path';
import { beforeAll, expect } from 'vitest';
import { stringify } from 'yaml';
import { repoRoot } from '../../src/dev/binaries.ts';
import { kubectlOk } from '../chart/support.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { kindOnlyCrd } from '../support/crds.ts';
import { HELM_INSTALL_TIMEOUT_MS, helmBinary } from '../support/helm.ts';
import { runDocExamples } from './runner.ts';

/**
 * docs/install-helm.md with the pinned helm against a kube-apiserver of its own (no nodes: the
 * operator's pods are never scheduled): lint, a server-side dry run of the rendered chart, the
 * configuration Secret, `helm install`, `helm upgrade`, `helm uninstall` and removing the data.
 * The cluster has cert-manager's and the Prometheus Operator's CRDs (their kinds only), as the
 * page's prerequisites say.
 */
const startCluster = useExtraClusters();
let kubeconfig = '';

beforeAll(async () => {
  await helmBinary();
  kubeconfig = (await startCluster({ name: uniqueName('doc-helm') })).kubeconfigPath;
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
}, HELM_INSTALL_TIMEOUT_MS);

runDocExamples('install-helm.md', {
  helm: true,
  links: { charts: join(repoRoot, 'charts') },
  env: () => ({ KUBECONFIG: kubeconfig }),
  hooks: {
    install: {
      after: async () => {
        // What the chart installed is what helm reports, on the cluster.
        const hooks = await kubectlOk(kubeconfig, [
          'get',
          'validatingwebhookconfigurations,mutatingwebhookconfigurations',
          '-o',
          'name',
        ]);
        expect(hooks.stdout).toContain('platform-validating-webhooks');
        expect(hooks.stdout).toContain('platform-mutating-webhooks');
      },
    },
    uninstall: {
      after: async () => {
        const hooks = await kubectlOk(kubeconfig, [
          'get',
          'validatingwebhookconfigurations,mutatingwebhookconfigurations',
          '-o',
          'name',
        ]);
        expect(hooks.stdout).not.toContain('platform-');
      },
    },
  },
});
