import { CoreV1Api } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, expect } from 'vitest';
import { createControllerManager } from '../../src/cli/controller.ts';
import { defaultOperatorOptions } from '../../src/cli/operator.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import type { Manager } from '../../src/runtime/manager.ts';
import { kubeConfigFor, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { runDocExamples } from './runner.ts';

/**
 * docs/gitops-health.md against a kube-apiserver of its own with our CRDs and the SharedSecret
 * and team membership controllers running: the page's `kubectl apply`, `kubectl wait` and `kubectl get` as a reader
 * runs them. (What kstatus and the page's Argo CD script say is e2e/controllers/gitops-health.test.ts.)
 */
const startCluster = useExtraClusters();
const namespace = 'team-a';
let cluster: Cluster;
let controllers: Manager | undefined;

beforeAll(async () => {
  cluster = await startCluster({ name: uniqueName('doc-health') });
  const kc = kubeConfigFor(cluster);
  await installCrds(kc);
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  // What a reader with Argo CD already has: its namespace and its ConfigMap.
  await core.createNamespace({ body: { metadata: { name: 'argocd' } } });
  await core.createNamespacedConfigMap({
    namespace: 'argocd',
    body: {
      metadata: { name: 'argocd-cm' },
      data: { 'application.instanceLabelKey': 'argocd.argoproj.io/instance' },
    },
  });
  controllers = createControllerManager(
    defaultOperatorOptions({
      kubeconfig: cluster.kubeconfigPath,
      controllers: ['sharedsecret', 'teammembership'],
      leaderElect: false,
      healthPort: 0,
      healthHost: '127.0.0.1',
    }),
    pino({ level: 'silent' }),
  );
  await controllers.start();
});
afterAll(async () => {
  await controllers?.stop();
});

runDocExamples('gitops-health.md', {
  env: () => ({ KUBECONFIG: cluster.kubeconfigPath, NAMESPACE: namespace }),
  hooks: {
    'argocd-cm': {
      // The health checks are in, and the ConfigMap's other settings are still there.
      after: async () => {
        const cm = await kubeConfigFor(cluster)
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ namespace: 'argocd', name: 'argocd-cm' });
        expect(cm.data?.['application.instanceLabelKey']).toBe('argocd.argoproj.io/instance');
        expect(
          Object.keys(cm.data ?? {}).filter((k) => k.startsWith('resource.customizations.health.')),
        ).toHaveLength(7);
      },
    },
  },
});
