import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { Agent } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { composeAccessKey, generateAccessKey, parseAccessKey } from '../../src/identity/keys.ts';
import { call, reviewToken, selfSubjectReview, useGatewayEnv } from '../gateway/support.ts';
import { tokenWebhookConfig, uniqueName, useExtraClusters } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Hole 4 of issue 16: the TokenReview endpoints were unauthenticated and counted every failure
 * against one shared source, so 31 bogus reviews a minute made every valid key
 * `authenticated: false` on every cluster that trusts the platform. Now only a cluster's reviewer
 * credential may ask (docs/trust.md), and bogus reviews, from anyone, cannot turn valid keys away:
 * failures count per reviewed key id only, and a key whose secret verifies is accepted whatever
 * others sent with its id. The cluster `edge` below is a real kube-apiserver trusting the gateway.
 */
describe('security: bogus TokenReviews cannot switch off platform keys', () => {
  const env = useGatewayEnv({
    onHost: true,
    https: true,
    // The production limits: a handful of failures blocks a source or a key id.
    gateway: {
      authFailureLimits: {
        perSource: { failures: 30, windowSeconds: 60, blockSeconds: 60 },
        perKey: { failures: 10, windowSeconds: 60, blockSeconds: 300 },
      },
    },
  });
  const startCluster = useExtraClusters();
  let edge: Cluster;
  let edgeDispatcher: Agent;
  let reviewer: string;
  const user = uniqueName('tr-victim');

  beforeAll(async () => {
    await env().user(user);
    reviewer = await env().reviewer({ cluster: 'edge' });
    edge = await startCluster({
      name: uniqueName('edge'),
      tokenWebhookConfig: tokenWebhookConfig(
        `${env().server.url}/kubernetes/tokenreview/cluster/edge`,
        env().caPem,
        reviewer,
      ),
    });
    edgeDispatcher = new Agent({ connect: { ca: edge.caPem } });
  });

  const review = (token: string, credential?: string, target?: string) =>
    reviewToken(env(), token, credential, target);
  const onEdge = (token: string) => selfSubjectReview(edge.server, edgeDispatcher, token);

  test('nobody but a reviewer credential of that cluster reviews anything', async () => {
    const key = await env().key({ user });
    const anonymous = await review(key);
    expect(anonymous.status).toBe(401);
    expect(anonymous.json.status).not.toHaveProperty('authenticated');
    // An ordinary key is no reviewer credential; nor is another cluster's.
    expect((await review(key, key)).status).toBe(403);
    const core = await env().reviewer({ cluster: 'core' });
    expect((await review(key, core)).status).toBe(403);
    expect((await review(key, reviewer, 'cluster/core')).status).toBe(403);
    await eventually(
      async () => (await review(key, reviewer)).json?.status?.authenticated === true,
      20_000,
      'the key',
    );
  });

  test('a reviewer credential reviews tokens, and whatever else it may ask acts as its own subject, which RBAC grants nothing', async () => {
    const management = `${env().server.url}/kubernetes/management/apis/management.platform/v1`;
    const asReviewer = (path: string, body?: unknown) =>
      call(`${management}${path}`, {
        token: reviewer,
        dispatcher: env().dispatcher,
        ...(body !== undefined
          ? { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) }
          : {}),
      });
    const refused: Record<string, number> = {
      'list keys': (await asReviewer('/ownedaccesskeys')).status,
      'list users': (await asReviewer('/users')).status,
      'list clusters': (await asReviewer('/clusters')).status,
      'make a key': (
        await asReviewer('/ownedaccesskeys', {
          apiVersion: 'management.platform/v1',
          kind: 'OwnedAccessKey',
          spec: {},
        })
      ).status,
    };
    expect(refused).toEqual({ 'list keys': 403, 'list users': 403, 'list clusters': 403, 'make a key': 403 });
    // Its `clusters: [edge]` entry lets it mint a direct token for edge: one of its own subject,
    // which the cluster's RBAC grants nothing.
    const minted = await asReviewer('/directclusterendpointtokens', { spec: {} });
    expect(minted.status, minted.text).toBe(201);
    const token = minted.json.status.token as string;
    const claims = decodeJwt(token);
    expect(claims.aud).toEqual(['edge']);
    expect(String(claims.sub)).toMatch(/^reviewer-/);
    const whoami = await onEdge(token);
    expect(whoami.status, whoami.text).toBe(201);
    expect(whoami.json.status.userInfo.username).toBe(claims.sub);
    const namespaces = await call(`${edge.server}/api/v1/namespaces`, { token, dispatcher: edgeDispatcher });
    expect(namespaces.status).toBe(403);
  });

  test("each cluster's credential is its own: deleting one cuts off that cluster only", async () => {
    const credential = async (cluster: string) => {
      const name = uniqueName(`tr-${cluster}`);
      const token = await env().key(
        {
          subject: uniqueName('reviewer'),
          type: 'Other',
          scope: { roles: [{ role: 'agent' }], clusters: [{ cluster }] },
        },
        name,
      );
      return { name, token };
    };
    const [west, north] = [await credential('west'), await credential('north')];
    const key = await env().key({ user });
    const reviews = async (who: { token: string }, cluster: string) =>
      (await review(key, who.token, `cluster/${cluster}`)).json?.status?.authenticated === true;
    await eventually(
      async () => (await reviews(west, 'west')) && (await reviews(north, 'north')),
      20_000,
      'both credentials to review',
    );
    await env().custom.deleteClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'ownedaccesskeys',
      name: west.name,
    });
    await eventually(
      async () => (await review(key, west.token, 'cluster/west')).status === 401,
      20_000,
      "the deleted credential's reviews to be refused",
    );
    expect(await reviews(north, 'north')).toBe(true);
  });

  test('every refusal has the same answer: unknown, malformed, disabled and out-of-scope keys cannot be told apart', async () => {
    const working = await env().key({ user });
    const elsewhere = await env().key({ user, scope: { clusters: [{ cluster: 'core' }] } });
    const disabled = await env().key({ user, disabled: true });
    // The gateway knows each key (a key of the same user, made last, is reviewed as accepted).
    await eventually(
      async () => (await review(working, reviewer)).json?.status?.authenticated === true,
      20_000,
      'the working key',
    );
    const refusals: Record<string, { status: number; body: unknown }> = {};
    for (const [what, token] of Object.entries({
      unknown: generateAccessKey(randomBytes).key,
      malformed: 'pak_not-a-key',
      'not a key at all': 'hello',
      disabled,
      'scoped to another cluster': elsewhere,
    })) {
      const answer = await review(token, reviewer);
      refusals[what] = { status: answer.status, body: answer.json };
    }
    const first = refusals.unknown;
    expect(first).toMatchObject({ status: 200, body: { status: { authenticated: false } } });
    for (const [what, refusal] of Object.entries(refusals)) expect(refusal, what).toEqual(first);
    expect(Object.keys(refusals)).toHaveLength(5);
  });

  test('floods of bogus reviews, anonymous or from a reviewer, leave valid keys working there', async () => {
    const victim = await env().key({ user });
    const parsed = parseAccessKey(victim);
    if (parsed instanceof Error) throw parsed;
    const bogus = [
      // Random keys, and the victim's public id with wrong secrets, sent anonymously and by edge's
      // own (compromised) reviewer credential.
      ...Array.from({ length: 40 }, () => generateAccessKey(randomBytes).key),
      ...Array.from({ length: 40 }, () => composeAccessKey(parsed.id, generateAccessKey(randomBytes).secret)),
    ];
    for (const token of bogus) {
      await review(token);
      const answer = await review(token, reviewer);
      expect(answer.json.status.authenticated).toBe(false);
    }
    // The victim's key, and a key created after the flood (read past the caches on first use),
    // still authenticate on the cluster.
    const fresh = await env().key({ user });
    expect((await review(fresh, reviewer)).json.status.authenticated).toBe(true);
    for (const token of [victim, fresh]) {
      await eventually(async () => (await onEdge(token)).status === 201, 20_000, 'the key on edge');
      expect((await review(token, reviewer)).json.status.authenticated).toBe(true);
    }
  });
});
