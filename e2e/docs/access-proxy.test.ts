import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect } from 'vitest';
import { parseAllDocuments } from 'yaml';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { useGatewayEnv } from '../gateway/support.ts';
import { impersonatorRbac, PROXY_IDENTITY } from '../support/access-proxy.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { runDocExamples } from './runner.ts';
import { gatewayVars, trustedCas, useTempDir } from './support.ts';

/**
 * docs/access-proxy.md: an HTTPS gateway on a kube-apiserver of its own (the platform's cluster,
 * with kube-controller-manager and the project controller), and two more kube-apiservers, `edge`
 * (connected) and `dev` (virtual), on which the page's commands install the platform's identity
 * and its one role, then reach them through the proxy with kubectl and curl.
 */
const env = useGatewayEnv({
  https: true,
  controllers: ['sharedsecret', 'accesskey', 'project'],
  controllerManager: true,
});
const startCluster = useExtraClusters();
const dir = useTempDir('doc-access-proxy-');
let aliceKey = '';
let adminKey = '';
let edge: Cluster;
let dev: Cluster;

beforeAll(async () => {
  aliceKey = await env().user('alice');
  adminKey = await env().user('root', { admin: true });
  // One after the other: useExtraClusters makes its control plane on the first call.
  edge = await startCluster({ name: uniqueName('edge') });
  dev = await startCluster({ name: uniqueName('dev') });
});

runDocExamples('access-proxy.md', {
  env: () => ({
    ...gatewayVars(env(), dir),
    ...trustedCas(dir, 'trusted-cas.pem', [env().caPem!, edge.caPem]),
    PLATFORM_ACCESS_KEY: aliceKey,
    PLATFORM_ADMIN_KEY: adminKey,
    EDGE_ADMIN_KUBECONFIG: edge.kubeconfigPath,
    DEV_ADMIN_KUBECONFIG: dev.kubeconfigPath,
  }),
  hooks: {
    'target-identity': {
      // The page's role and binding are the ones the e2e tests install on their targets.
      before: (ctx) => {
        const documents = parseAllDocuments(
          readFileSync(join(ctx.workdir, 'platform-impersonator.yaml'), 'utf8'),
        );
        const rbac = impersonatorRbac({ kind: 'ServiceAccount', ...PROXY_IDENTITY });
        expect(documents.map((document) => document.toJS())).toEqual([
          rbac.clusterRole,
          rbac.clusterRoleBinding,
        ]);
      },
    },
  },
});
