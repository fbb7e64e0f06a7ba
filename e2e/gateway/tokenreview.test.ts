import { Agent } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { tokenWebhookConfig, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, selfSubjectReview, useGatewayEnv } from './support.ts';

/**
 * Trust from other clusters: a second real kube-apiserver started with
 * `--authentication-token-webhook-config-file` pointing at the gateway's TokenReview endpoint for
 * the cluster `edge` accepts platform access keys as bearer tokens, with the key's user and groups;
 * out-of-scope and disabled keys are refused there. The gateway runs against the run's host
 * cluster, so this file starts only the trusting apiserver.
 */
describe('gateway: TokenReview', () => {
  // HTTPS: kube-apiserver sends the reviewer credential of its webhook kubeconfig over TLS only.
  const env = useGatewayEnv({ onHost: true, https: true });
  const startCluster = useExtraClusters();
  // Reviewers (the reviewing apiservers) authenticate; see e2e/security/gateway-tokenreview.test.ts.
  const user = uniqueName('tr-user');
  let edge: Cluster;
  let dispatcher: Agent;
  let token: string;

  beforeAll(async () => {
    token = await env().user(user);
    const reviewUrl = `${env().server.url}/kubernetes/tokenreview/cluster/edge`;
    edge = await startCluster({
      name: uniqueName('edge'),
      tokenWebhookConfig: tokenWebhookConfig(
        reviewUrl,
        env().caPem,
        await env().reviewer({ cluster: 'edge' }),
      ),
    });
    dispatcher = new Agent({ connect: { ca: edge.caPem } });
  });

  const whoami = (bearer: string) => selfSubjectReview(edge.server, dispatcher, bearer);

  test('a valid key authenticates on the other cluster with its user and groups', async () => {
    const answer = await whoami(token);
    expect(answer.status, answer.text).toBe(201);
    expect(answer.json.status.userInfo.username).toBe(user);
    expect(answer.json.status.userInfo.groups).toEqual(
      expect.arrayContaining(['platform:authenticated', `platform:user:${user}`, 'system:authenticated']),
    );
    expect(answer.json.status.userInfo.extra['management.platform/access-key']).toHaveLength(1);
    // The other cluster's RBAC decides what it may do.
    const namespaces = await call(`${edge.server}/api/v1/namespaces`, { token, dispatcher });
    expect(namespaces.status).toBe(403);
  });

  test('a key scoped to this cluster is accepted; one scoped to another cluster is not', async () => {
    const here = await env().key({ user, scope: { clusters: [{ cluster: 'edge' }] } });
    const elsewhere = await env().key({ user, scope: { clusters: [{ cluster: 'core' }] } });
    const project = await env().key({ user, scope: { projects: [{ project: 'web' }] } });
    await eventually(async () => (await whoami(here)).status === 201, 20_000, 'the scoped key');
    expect((await whoami(elsewhere)).status).toBe(401);
    expect((await whoami(project)).status).toBe(401);
  });

  test('disabled, unknown and malformed keys are refused', async () => {
    const disabled = await env().key({ user, disabled: true });
    // Give the cache time to hold it, then ask: still refused.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect((await whoami(disabled)).status).toBe(401);
    expect((await whoami('pak_not-a-key')).status).toBe(401);
    // Disabling a working key revokes it there too (the apiserver caches reviews for 1 s).
    const revoked = await env().key({ user }, uniqueName('revoked'));
    await eventually(async () => (await whoami(revoked)).status === 201, 20_000, 'the key to work');
    const name = (await env().custom.listClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
    })) as { items: { metadata: { name: string }; spec: { user?: string; disabled?: boolean } }[] };
    const victim = name.items.filter(
      (item) => item.spec.user === user && item.metadata.name.startsWith('revoked'),
    );
    await env().custom.patchClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
      name: victim[0]!.metadata.name,
      body: [{ op: 'add', path: '/spec/disabled', value: true }],
    });
    await eventually(async () => (await whoami(revoked)).status === 401, 20_000, 'the key to be refused');
  });

  test('the review endpoint for a virtual cluster follows virtual cluster scopes', async () => {
    const scoped = await env().key({
      user,
      scope: { virtualClusters: [{ project: 'web', virtualCluster: 'dev' }] },
    });
    const reviewers = {
      dev: await env().reviewer({ project: 'web', virtualCluster: 'dev' }),
      prod: await env().reviewer({ project: 'web', virtualCluster: 'prod' }),
      edge: await env().reviewer({ cluster: 'edge' }),
    };
    const review = (path: string, reviewer: string = reviewers.dev) =>
      call(`${env().server.url}/kubernetes/tokenreview/${path}`, {
        method: 'POST',
        token: reviewer,
        dispatcher: env().dispatcher,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token: scoped },
        }),
      });
    await eventually(
      async () => (await review('project/web/virtualcluster/dev')).json?.status?.authenticated === true,
      20_000,
      'the review',
    );
    const ok = await review('project/web/virtualcluster/dev');
    expect(ok.json).toMatchObject({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      status: { authenticated: true, user: { username: user } },
    });
    expect((await review('project/web/virtualcluster/prod', reviewers.prod)).json.status.authenticated).toBe(
      false,
    );
    expect((await review('cluster/edge', reviewers.edge)).json.status.authenticated).toBe(false);
    expect((await review('somewhere/else')).status).toBe(404);
  });
});
