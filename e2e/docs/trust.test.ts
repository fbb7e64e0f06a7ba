import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { useGatewayEnv } from '../gateway/support.ts';
import { uniqueName, useExtraClusters } from '../support/cluster.ts';
import { type DocContext, runDocExamples } from './runner.ts';
import { gatewayVars, trustedCas, useTempDir } from './support.ts';

/**
 * docs/trust.md: a gateway (HTTPS, own kube-apiserver with the webhooks) and two more real
 * kube-apiservers started from the files the page's commands write: `edge` with the page's
 * TokenReview webhook kubeconfig, `east` with the page's AuthenticationConfiguration (a JWT
 * authenticator reading the gateway's discovery document and keys). The page's kubectl and curl
 * commands then run against them.
 */
const env = useGatewayEnv({ https: true });
const startCluster = useExtraClusters();
const dir = useTempDir('doc-trust-');
let aliceKey = '';
let adminKey = '';
const clusters: Cluster[] = [];

beforeAll(async () => {
  aliceKey = await env().user('alice');
  adminKey = await env().user('root', { admin: true });
});

/** The page's commands trust the gateway's CA and the CA of the clusters started here. */
function trustEverything(ctx: DocContext): void {
  Object.assign(
    ctx.vars,
    trustedCas(dir, 'trusted-cas.pem', [env().caPem!, ...clusters.map((c) => c.caPem)]),
  );
}

runDocExamples('trust.md', {
  env: () => ({
    ...gatewayVars(env(), dir),
    PLATFORM_ACCESS_KEY: aliceKey,
    PLATFORM_ADMIN_KEY: adminKey,
    // The commands name their servers and credentials themselves.
    KUBECONFIG: '',
  }),
  hooks: {
    'webhook-kubeconfig': {
      before: (ctx) => writeFileSync(join(ctx.workdir, 'platform-ca.crt'), env().caPem!),
      after: async (_result, ctx) => {
        const edge = await startCluster({
          name: uniqueName('edge'),
          tokenWebhookConfig: readFileSync(join(ctx.workdir, 'platform-token-webhook.kubeconfig'), 'utf8'),
        });
        clusters.push(edge);
        trustEverything(ctx);
        ctx.vars.CLUSTER_SERVER = edge.server;
        ctx.vars.CLUSTER_ADMIN_KUBECONFIG = edge.kubeconfigPath;
      },
    },
    'authentication-config': {
      after: async (_result, ctx) => {
        const config = readFileSync(join(ctx.workdir, 'authentication-config.yaml'), 'utf8');
        expect(config).toContain(`url: ${env().server.url}\n`);
        const east = await startCluster({ name: uniqueName('east'), authenticationConfig: config });
        clusters.push(east);
        trustEverything(ctx);
        ctx.vars.EAST_SERVER = east.server;
      },
    },
  },
});
