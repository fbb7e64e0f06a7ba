import { decodeJwt } from 'jose';
import { Agent } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import {
  jwtAuthenticationConfig,
  kubectl,
  tokenKubeconfig,
  tokenWebhookConfig,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, reviewToken, selfSubjectReview, useGatewayEnv } from './support.ts';

/**
 * DirectClusterEndpointTokens end with what minted them (issue 30): a token is accepted by the
 * platform's TokenReview webhook while its access key and its owner are in force, and refused once
 * the key is disabled or deleted, the owner is deleted, or the owner revokes all their tokens
 * (`POST users/<name>/tokenrevocation`). `edge` is a real kube-apiserver trusting the platform
 * through the webhook; `east` verifies tokens offline through the JWKS and, as docs/trust.md
 * states, cannot see a revocation: a revoked token works there until it expires.
 */
describe('gateway: direct cluster endpoint tokens are revocable', () => {
  const env = useGatewayEnv({ onHost: true, https: true });
  const startCluster = useExtraClusters();
  const alice = uniqueName('dt-alice');
  let reviewer: string;
  let edge: Cluster;
  let east: Cluster;
  let edgeDispatcher: Agent;

  const ownedAccessKeys = { group: 'management.platform', version: 'v1', plural: 'ownedaccesskeys' };
  const users = { group: 'management.platform', version: 'v1', plural: 'users' };

  /** A key of `user` named `name`, accepted by the gateway. */
  const keyOf = async (user: string, name = uniqueName('dt-key')) => {
    const token = await env().key({ user }, name);
    await env().accepted(token);
    return { name, token };
  };

  /** A token minted with `key`, for the clusters edge and east. */
  const mint = async (key: string) => {
    const answer = await call(`${env().api}/directclusterendpointtokens`, {
      method: 'POST',
      token: key,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { scope: { clusters: [{ cluster: 'edge' }, { cluster: 'east' }] } } }),
    });
    expect(answer.status, answer.text).toBe(201);
    return answer.json.status.token as string;
  };

  /** The platform's TokenReview of `token` for the cluster edge, as edge's apiserver sends it. */
  const review = async (token: string) => {
    const answer = await reviewToken(env(), token, reviewer);
    expect(answer.status, answer.text).toBe(200);
    return answer.json.status as { authenticated: boolean; user?: Record<string, unknown> };
  };
  const accepted = async (token: string) => (await review(token)).authenticated;

  /** The gateway's caches follow the apiserver's watch: the refusal comes once they saw the change. */
  const refusedSoon = (token: string, what: string) =>
    eventually(async () => !(await accepted(token)), 20_000, what);

  const revokeAll = (user: string, key: string) =>
    call(`${env().api}/users/${user}/tokenrevocation`, {
      method: 'POST',
      token: key,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: '{}',
    });

  beforeAll(async () => {
    await env().user(alice);
    reviewer = await env().reviewer({ cluster: 'edge' });
    [edge, east] = await Promise.all([
      startCluster({
        name: uniqueName('edge'),
        tokenWebhookConfig: tokenWebhookConfig(
          `${env().server.url}/kubernetes/tokenreview/cluster/edge`,
          env().caPem,
          reviewer,
        ),
      }),
      startCluster({
        name: uniqueName('east'),
        authenticationConfig: jwtAuthenticationConfig(env().server.url, 'east', env().caPem!),
      }),
    ]);
    edgeDispatcher = new Agent({ connect: { ca: edge.caPem } });
  });

  test('a token is reviewed as its user, with the key that minted it', async () => {
    const key = await keyOf(alice);
    const token = await mint(key.token);
    const status = await review(token);
    expect(status.authenticated).toBe(true);
    expect(status.user).toMatchObject({
      username: alice,
      groups: expect.arrayContaining(['platform:authenticated', `platform:user:${alice}`]),
      extra: { 'management.platform/access-key': [key.name] },
    });
    expect(decodeJwt(token)['management.platform']).toMatchObject({ accessKey: { name: key.name }, gen: 0 });
  });

  test('disabling the minting key ends its tokens, and only its tokens', async () => {
    const key = await keyOf(alice);
    const other = await keyOf(alice);
    const token = await mint(key.token);
    const otherToken = await mint(other.token);
    expect(await accepted(token)).toBe(true);
    await env().custom.patchClusterCustomObject({
      ...ownedAccessKeys,
      name: key.name,
      body: [{ op: 'add', path: '/spec/disabled', value: true }],
    });
    await refusedSoon(token, 'the token of the disabled key to be refused');
    expect(await accepted(otherToken)).toBe(true);
    // Enabling the key again brings its tokens back: they end with the key, not on their own.
    await env().custom.patchClusterCustomObject({
      ...ownedAccessKeys,
      name: key.name,
      body: [{ op: 'replace', path: '/spec/disabled', value: false }],
    });
    await eventually(async () => accepted(token), 20_000, 'the token of the enabled key');
  });

  test('deleting the minting key ends its tokens; a new key of the same name does not revive them', async () => {
    const key = await keyOf(alice);
    const token = await mint(key.token);
    expect(await accepted(token)).toBe(true);
    await env().custom.deleteClusterCustomObject({ ...ownedAccessKeys, name: key.name });
    await refusedSoon(token, 'the token of the deleted key to be refused');
    const again = await keyOf(alice, key.name);
    expect(await accepted(await mint(again.token))).toBe(true);
    expect(await accepted(token)).toBe(false);
  });

  test("deleting the owner ends the tokens of all the owner's keys", async () => {
    const bob = uniqueName('dt-bob');
    const bobKey = await env().user(bob);
    const token = await mint(bobKey);
    expect(await accepted(token)).toBe(true);
    await env().custom.deleteClusterCustomObject({ ...users, name: bob });
    await refusedSoon(token, "the token of the deleted user's key to be refused");
  });

  test("deleting a team ends the tokens of the team's keys", async () => {
    const team = uniqueName('dt-team');
    const teams = { group: 'management.platform', version: 'v1', plural: 'teams' };
    await env().custom.createClusterCustomObject({
      ...teams,
      body: { apiVersion: 'management.platform/v1', kind: 'Team', metadata: { name: team }, spec: {} },
    });
    const teamKey = await env().key({ team });
    await env().accepted(teamKey);
    const token = await mint(teamKey);
    expect(decodeJwt(token)['management.platform']).toMatchObject({ kind: 'Team', name: team, gen: 0 });
    expect(await accepted(token)).toBe(true);
    await env().custom.deleteClusterCustomObject({ ...teams, name: team });
    await refusedSoon(token, "the token of the deleted team's key to be refused");
  });

  test('disabling the owner ends their tokens; enabling them brings the tokens back', async () => {
    const erin = uniqueName('dt-erin');
    const erinKey = await env().user(erin);
    const token = await mint(erinKey);
    expect(await accepted(token)).toBe(true);
    await env().custom.patchClusterCustomObject({
      ...users,
      name: erin,
      body: [{ op: 'add', path: '/spec/disabled', value: true }],
    });
    await refusedSoon(token, "the token of the disabled user's key to be refused");
    await env().custom.patchClusterCustomObject({
      ...users,
      name: erin,
      body: [{ op: 'replace', path: '/spec/disabled', value: false }],
    });
    await eventually(async () => accepted(token), 20_000, 'the token of the enabled user');
  });

  test('revoke-all ends every token the user holds at once; tokens minted afterwards work', async () => {
    const carol = uniqueName('dt-carol');
    const carolKey = await env().user(carol);
    const second = await keyOf(carol);
    const tokens = [await mint(carolKey), await mint(second.token)];
    for (const token of tokens) expect(await accepted(token)).toBe(true);

    const revoked = await revokeAll(carol, carolKey);
    expect(revoked.status, revoked.text).toBe(201);
    expect(revoked.json).toMatchObject({ kind: 'Status', status: 'Success' });
    // The answer comes once this gateway's cache holds the new generation: no wait needed.
    for (const token of tokens) expect(await accepted(token)).toBe(false);
    const stored = (await env().custom.getClusterCustomObject({ ...users, name: carol })) as {
      spec: { tokenGeneration?: number };
    };
    expect(stored.spec.tokenGeneration).toBe(1);

    const fresh = await mint(carolKey);
    expect(decodeJwt(fresh)['management.platform']).toMatchObject({ gen: 1 });
    expect(await accepted(fresh)).toBe(true);
    // The keys themselves still work: revoking tokens is not disabling keys.
    await env().accepted(second.token);
  });

  test('revocations at once each raise the generation: none is lost to a concurrent write', async () => {
    const frank = uniqueName('dt-frank');
    const frankKey = await env().user(frank);
    const answers = await Promise.all([1, 2, 3].map(() => revokeAll(frank, frankKey)));
    for (const answer of answers) expect(answer.status, answer.text).toBe(201);
    const stored = (await env().custom.getClusterCustomObject({ ...users, name: frank })) as {
      spec: { tokenGeneration?: number };
    };
    expect(stored.spec.tokenGeneration).toBe(3);
  });

  test('a real apiserver trusting the webhook refuses a revoked token; one verifying offline cannot tell', async () => {
    const dave = uniqueName('dt-dave');
    const daveKey = await env().user(dave);
    const token = await mint(daveKey);
    const whoamiOnEdge = () => selfSubjectReview(edge.server, edgeDispatcher, token);
    const whoamiOnEast = () =>
      kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: tokenKubeconfig(east, token) });
    await eventually(async () => (await whoamiOnEdge()).status === 201, 30_000, 'edge to accept the token');
    expect((await whoamiOnEdge()).json.status.userInfo.username).toBe(dave);
    await eventually(async () => (await whoamiOnEast()).code === 0, 60_000, 'east to accept the token');

    expect((await revokeAll(dave, daveKey)).status).toBe(201);
    // edge asks the platform (its review cache lasts a second here).
    await eventually(async () => (await whoamiOnEdge()).status === 401, 20_000, 'edge to refuse the token');
    // east checks the signature only: the revoked token works there until it expires (docs/trust.md).
    const onEast = await whoamiOnEast();
    expect(onEast.code, onEast.stderr).toBe(0);
    expect(JSON.parse(onEast.stdout).status.userInfo.username).toBe(dave);
  });
});
