import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { beforeAll, describe, expect, test } from 'vitest';
import type { Cluster } from '../../src/dev/controlplane.ts';
import {
  jwtAuthenticationConfig,
  kubectl,
  tokenKubeconfig,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, useGatewayEnv } from './support.ts';

/**
 * DirectClusterEndpointTokens through the gateway: `POST directclusterendpointtokens` mints a JWT
 * that a real kube-apiserver, configured with a structured JWT authenticator whose issuer is the
 * gateway, verifies on its own from the gateway's discovery document and JWKS.
 */
describe('gateway: directclusterendpointtokens', () => {
  const env = useGatewayEnv({ https: true, controllers: [] });
  const startCluster = useExtraClusters();
  let east: Cluster;
  let alice: string;
  let auditDir: string;

  const mint = (body: unknown, token = alice) =>
    call(`${env().api}/directclusterendpointtokens`, {
      method: 'POST',
      token,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  const whoami = (jwt: string) =>
    kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: tokenKubeconfig(east, jwt) });

  beforeAll(async () => {
    await env().custom.createClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'teams',
      body: { apiVersion: 'management.platform/v1', kind: 'Team', metadata: { name: 'ops' }, spec: {} },
    });
    alice = await env().user('alice', { teams: ['ops'] });
    // A policy that logs every request with its bodies: tokens must still never reach the log
    // (the level policies leave token requests out entirely).
    auditDir = join(env().cluster!.kubeconfigPath, '..', 'audit');
    const configured = await call(`${env().api}/configs`, {
      method: 'POST',
      token: await env().user('root', { admin: true }),
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/yaml' },
      body: `kind: Config\nmetadata:\n  name: config\nspec:\n  raw: |\n    audit:\n      enabled: true\n      path: ${auditDir}/audit.log\n      policy:\n        rules:\n        - level: RequestResponse\n`,
    });
    expect(configured.status, configured.text).toBe(201);
    east = await startCluster({
      name: uniqueName('east'),
      authenticationConfig: jwtAuthenticationConfig(env().server.url, 'east', env().caPem!),
    });
  });

  test('discovery and JWKS are public and name the issuer and the signing key', async () => {
    const discovery = await call(`${env().server.url}/.well-known/openid-configuration`, {
      dispatcher: env().dispatcher,
    });
    expect(discovery.status).toBe(200);
    expect(discovery.json).toMatchObject({
      issuer: env().server.url,
      jwks_uri: `${env().server.url}/openid/v1/jwks`,
    });
    const jwks = await call(discovery.json.jwks_uri, { dispatcher: env().dispatcher });
    expect(jwks.status).toBe(200);
    expect(jwks.json.keys.length).toBeGreaterThan(0);
    expect(jwks.json.keys[0]).toMatchObject({ kty: 'EC', crv: 'P-256', use: 'sig', alg: 'ES256' });
    expect(jwks.json.keys[0]).not.toHaveProperty('d');
    // docs/trust.md: both are served with a cache time of 60 s.
    for (const answer of [discovery, jwks])
      expect(answer.headers.get('cache-control')).toMatch(/\bmax-age=60\b/);
  });

  test('a token for cluster east authenticates there as the caller, with the platform groups', async () => {
    const answer = await mint({ spec: { ttl: 600, scope: { clusters: [{ cluster: 'east' }] } } });
    expect(answer.status, answer.text).toBe(201);
    expect(answer.json).toMatchObject({ kind: 'DirectClusterEndpointToken', spec: { ttl: 600 } });
    const jwt: string = answer.json.status.token;
    const claims = decodeJwt(jwt);
    expect(claims).toMatchObject({ iss: env().server.url, sub: 'alice', aud: ['east'] });
    expect(claims.exp! - claims.iat!).toBe(600);
    expect(claims.groups).toEqual(expect.arrayContaining(['platform:user:alice', 'platform:team:ops']));
    expect(claims['management.platform']).toMatchObject({ name: 'alice', kind: 'User' });
    expect(decodeProtectedHeader(jwt)).toMatchObject({ alg: 'ES256', kid: expect.any(String) });

    // The authenticator reads the discovery document in the background after its start.
    await eventually(async () => (await whoami(jwt)).code === 0, 60_000, 'east to accept the token');
    const review = JSON.parse((await whoami(jwt)).stdout);
    expect(review.status.userInfo.username).toBe('alice');
    expect(review.status.userInfo.groups).toEqual(expect.arrayContaining(['platform:team:ops']));
  });

  test('a token without a cluster scope has the platform audience, which east refuses', async () => {
    const answer = await mint({ spec: {} });
    expect(answer.status, answer.text).toBe(201);
    const jwt: string = answer.json.status.token;
    const claims = decodeJwt(jwt);
    // ttl 0 or unset: the default of one hour.
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(claims.aud).not.toContain('east');
    const refused = await whoami(jwt);
    expect(refused.code).not.toBe(0);
  });

  test('a scope may only narrow the caller key; bad bodies are 422', async () => {
    const westOnly = await env().key({ user: 'alice', scope: { clusters: [{ cluster: 'west' }] } });
    const westScope = { spec: { scope: { clusters: [{ cluster: 'west' }] } } };
    await eventually(async () => (await mint(westScope, westOnly)).status === 201, 30_000, 'the scoped key');
    const widened = await mint({ spec: { scope: { clusters: [{ cluster: 'east' }] } } }, westOnly);
    expect(widened.status).toBe(403);
    expect(widened.json.message).toContain('east');
    // Asking for no scope with a scoped key keeps the key's scope.
    const unscoped = await mint({ spec: {} }, westOnly);
    expect(unscoped.status, unscoped.text).toBe(201);
    expect(decodeJwt(unscoped.json.status.token).aud).toEqual(['west']);

    const negative = await mint({ spec: { ttl: -1 } });
    expect(negative.status).toBe(422);
    expect(negative.json.details.causes[0]).toMatchObject({ field: 'spec.ttl', reason: 'FieldValueInvalid' });
    const listed = await call(`${env().api}/directclusterendpointtokens`, {
      token: alice,
      dispatcher: env().dispatcher,
    });
    // Create only, as discovery says: other verbs are 405, as kube-apiserver answers them.
    expect(listed.status).toBe(405);
  });

  test('the audit log records the calls but never a token', async () => {
    const answer = await mint({ spec: { ttl: 600 } });
    expect(answer.status).toBe(201);
    const jwt: string = answer.json.status.token;
    const signature = jwt.split('.')[2]!;
    let lines: string[] = [];
    await eventually(
      () => {
        lines = readdirSync(auditDir)
          .filter((file) => file.startsWith('audit'))
          .flatMap((file) => readFileSync(join(auditDir, file), 'utf8').split('\n'))
          .filter((line) => line.includes('directclusterendpointtokens'));
        return lines.some((line) => JSON.parse(line).responseStatus?.code === 201);
      },
      10_000,
      'audit lines for the token requests',
    );
    const all = readdirSync(auditDir)
      .map((file) => readFileSync(join(auditDir, file), 'utf8'))
      .join('\n');
    expect(all).not.toContain(signature);
    expect(all).not.toContain(alice);
    // Capped at Metadata whatever the policy says: no request or response object.
    for (const line of lines) {
      const event = JSON.parse(line);
      expect(event).toMatchObject({ kind: 'Event', level: 'Metadata' });
      expect(event).not.toHaveProperty('requestObject');
      expect(event).not.toHaveProperty('responseObject');
    }
  });
});
