import { createServer, type Server } from 'node:https';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Scope } from '../../src/api/scope.ts';
import type { Cluster } from '../../src/dev/controlplane.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { mintDirectClusterEndpointToken, openIdConfiguration } from '../../src/identity/direct-token.ts';
import {
  currentSigningKey,
  generateSigningKey,
  publicJwks,
  type RotationPolicy,
  type SigningKey,
  SigningKeyStore,
} from '../../src/identity/signing-keys.ts';
import { createCertificateAuthority, issueCertificate } from '../../src/pki/certificates.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import {
  jwtAuthenticationConfig,
  kubeConfigFor,
  kubectl,
  tokenKubeconfig,
  uniqueName,
  useExtraClusters,
} from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

const PLATFORM_NAMESPACE = 'platform-system';
const subject = {
  username: 'alice',
  groups: ['platform:authenticated', 'platform:user:alice', 'platform:team:ops'],
  uid: 'uid-alice',
  name: 'alice',
  kind: 'User' as const,
};

// A cluster trusts DirectClusterEndpointTokens through its own structured JWT authenticator,
// pointed at the platform's OIDC discovery document and JWKS (served here by a small HTTPS server
// from the same library functions the gateway uses), never calling the platform per request.
describe('direct cluster endpoint tokens verified by a real apiserver', () => {
  const startCluster = useExtraClusters();
  let cluster: Cluster;
  let issuerServer: Server;
  let issuer: string;
  let ring: readonly SigningKey[] = [];
  let store: SigningKeyStore;
  // Rotation every 4 s, a successor signs 1 s after it is published, old keys kept an hour.
  const policy: RotationPolicy = { rotationPeriodMs: 4000, publishLeadMs: 1000, maxTokenTtlMs: 3600_000 };

  beforeAll(async () => {
    const ca = await createCertificateAuthority('test issuer ca', 3600);
    const serving = await issueCertificate(ca, {
      commonName: '127.0.0.1',
      ipAddresses: ['127.0.0.1'],
      usage: 'server',
      validForSeconds: 3600,
    });
    const port = await freePort();
    issuer = `https://127.0.0.1:${port}`;
    issuerServer = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
      const body =
        req.url === '/.well-known/openid-configuration'
          ? openIdConfiguration(issuer, `${issuer}/openid/v1/jwks`)
          : req.url === '/openid/v1/jwks'
            ? publicJwks(ring)
            : undefined;
      res.writeHead(body ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body ?? {}));
    });
    await new Promise<void>((resolve) => issuerServer.listen(port, '127.0.0.1', resolve));

    cluster = await startCluster({
      name: uniqueName('jwt'),
      authenticationConfig: jwtAuthenticationConfig(issuer, 'east', ca.certPem),
    });
    const kc = kubeConfigFor(cluster);
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: PLATFORM_NAMESPACE } } });
    store = new SigningKeyStore(new KubeClient(kc), PLATFORM_NAMESPACE, policy);
    ring = await store.ensure(Date.now());
  });
  afterAll(async () => {
    await new Promise((resolve) => issuerServer?.close(resolve));
  });

  const mint = (options: { scope?: Scope; ttlSeconds?: number; now?: number; key?: SigningKey } = {}) =>
    mintDirectClusterEndpointToken({
      subject,
      generation: 0,
      accessKey: { name: 'alice-key', uid: 'uid-alice-key' },
      scope: options.scope ?? { clusters: [{ cluster: 'east' }] },
      ttlSeconds: options.ttlSeconds ?? 600,
      issuer,
      key: options.key ?? currentSigningKey(ring, Date.now())!,
      now: options.now ?? Date.now(),
    });

  /** `kubectl auth whoami` with nothing but the token (no admin credentials in the kubeconfig). */
  const whoami = (token: string) =>
    kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: tokenKubeconfig(cluster, token) });

  test('a valid token authenticates with the right user and groups', async () => {
    const token = await mint();
    // The authenticator fetches the discovery document in the background after start.
    await eventually(
      async () => (await whoami(token)).code === 0,
      60_000,
      'the JWT authenticator to be ready',
    );
    const result = await whoami(token);
    const review = JSON.parse(result.stdout);
    expect(review.status.userInfo.username).toBe('alice');
    expect(review.status.userInfo.groups).toEqual(expect.arrayContaining(subject.groups));
  });

  test('expired, other-audience and unknown-key tokens are refused', async () => {
    const expired = await mint({ now: Date.now() - 3600_000, ttlSeconds: 60 });
    const otherAudience = await mint({ scope: { clusters: [{ cluster: 'west' }] } });
    const stranger = await generateSigningKey();
    const unknownKey = await mint({
      key: {
        ...stranger,
        alg: 'ES256',
        createdAt: new Date().toISOString(),
        signsFrom: new Date().toISOString(),
      },
    });
    for (const token of [expired, otherAudience, unknownKey]) {
      const result = await whoami(token);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(/Unauthorized|must be logged in/i);
    }
  });

  test('tokens keep working across a key rotation until they expire', async () => {
    const before = await mint();
    const oldKid = currentSigningKey(ring, Date.now())!.kid;
    // Rotate: a successor is published, then takes over signing; the old key stays published.
    await new Promise((resolve) => setTimeout(resolve, policy.rotationPeriodMs));
    ring = await store.ensure(Date.now());
    await new Promise((resolve) => setTimeout(resolve, policy.publishLeadMs + 100));
    ring = await store.ensure(Date.now());
    const newKid = currentSigningKey(ring, Date.now())!.kid;
    expect(newKid).not.toBe(oldKid);
    expect(publicJwks(ring).keys.map((key) => key.kid)).toEqual([oldKid, newKid]);
    const after = await mint();
    expect((await whoami(before)).code).toBe(0);
    // The apiserver learns the new key from the JWKS when it meets its kid.
    await eventually(async () => (await whoami(after)).code === 0, 60_000, 'a token of the new key');
    expect((await whoami(before)).code).toBe(0);
  });
});
