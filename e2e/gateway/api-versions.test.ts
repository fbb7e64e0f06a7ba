import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { kubectl, uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, GROUP_VERSION, useGatewayEnv, writeGatewayKubeconfig } from './support.ts';

/**
 * What the spec leaves to "the server may reject unrecognized apiVersion values", and its
 * `authenticateVersionEndpoint`, through the gateway with the real kubectl (the control plane's
 * own build) and side by side with the kube-apiserver behind it: another group/version is a
 * Kubernetes Status as kube-apiserver answers it, whether the apiserver stores the kind or the
 * gateway serves it itself.
 */
describe('gateway: API versions and /version', () => {
  const env = useGatewayEnv({ https: true });
  const dir = mkdtempSync(join(tmpdir(), 'platform-gateway-versions-'));
  const namespace = uniqueName('versions');
  let admin: string;
  let gatewayConfig: string;
  let apiserverConfig: string;

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    admin = await env().user('vadmin', { admin: true });
    gatewayConfig = writeGatewayKubeconfig(env(), dir, 'vadmin', admin);
    apiserverConfig = join(dir, 'apiserver.kubeconfig');
    writeFileSync(apiserverConfig, env().kc.exportConfig(), { mode: 0o600 });
  });

  const kubectlOn = (config: string, args: string[], stdin?: string) =>
    kubectl(['--cache-dir', join(dir, `cache-${config === gatewayConfig ? 'gw' : 'api'}`), ...args], {
      kubeconfig: config,
      ...(stdin !== undefined ? { stdin } : {}),
    });
  const post = (path: string, body: unknown) =>
    call(`${env().api}${path}`, {
      method: 'POST',
      token: admin,
      dispatcher: env().dispatcher,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  test('an unrecognized group/version in the path: 404 Status, as kube-apiserver answers it', async () => {
    for (const path of [
      '/apis/management.platform/v2',
      '/apis/management.platform/v2/namespaces/default/sharedsecrets',
      '/apis/management.platform/v1beta1/ownedaccesskeys/x',
      '/apis/no-such-group.example/v1/things',
    ]) {
      const gateway = await call(`${env().base}${path}`, { token: admin, dispatcher: env().dispatcher });
      expect(gateway.status, path).toBe(404);
      expect(gateway.json).toMatchObject({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'NotFound',
        code: 404,
      });
      const throughGateway = await kubectlOn(gatewayConfig, ['get', '--raw', path]);
      const direct = await kubectlOn(apiserverConfig, ['get', '--raw', path]);
      expect(throughGateway.code, path).not.toBe(0);
      expect(direct.code, path).not.toBe(0);
      expect(throughGateway.stderr).toBe(direct.stderr);
      expect(throughGateway.stderr).toContain('Error from server (NotFound)');
    }
  });

  test('kubectl apply of an object in another version: kubectl finds no such kind, as against kube-apiserver', async () => {
    const manifest = `apiVersion: management.platform/v2
kind: SharedSecret
metadata: {name: other-version, namespace: ${namespace}}
spec: {}
`;
    const throughGateway = await kubectlOn(gatewayConfig, ['apply', '-f', '-'], manifest);
    const direct = await kubectlOn(apiserverConfig, ['apply', '-f', '-'], manifest);
    expect(throughGateway.code).not.toBe(0);
    expect(throughGateway.stderr).toContain(
      'no matches for kind "SharedSecret" in version "management.platform/v2"',
    );
    expect(direct.stderr).toContain('no matches for kind "SharedSecret" in version "management.platform/v2"');
  });

  test('a body in another version: 400 with the message kube-apiserver gives, for stored and served kinds alike', async () => {
    const sharedSecret = {
      apiVersion: 'management.platform/v2',
      kind: 'SharedSecret',
      metadata: { name: 'body-v2', namespace },
      spec: {},
    };
    const stored = await post(`/namespaces/${namespace}/sharedsecrets`, sharedSecret);
    expect(stored.status, stored.text).toBe(400);
    // The apiserver's own answer, for the kind it stores.
    const apiserver = await env()
      .custom.createNamespacedCustomObject({
        group: 'management.platform',
        version: 'v1',
        namespace,
        plural: 'sharedsecrets',
        body: sharedSecret,
      })
      .then(
        () => undefined,
        (err: { code?: number; body?: string }) => err,
      );
    expect(apiserver?.code).toBe(400);
    const expected = JSON.parse(apiserver?.body ?? '{}') as { message: string; reason: string };
    expect(stored.json).toMatchObject({ kind: 'Status', code: 400, reason: expected.reason });
    expect(stored.json.message).toBe(expected.message);

    for (const [path, kind, spec] of [
      ['/directclusterendpointtokens', 'DirectClusterEndpointToken', { ttl: 600 }],
      ['/configs', 'Config', { raw: '' }],
      [
        `/namespaces/${namespace}/virtualclusterinstances/vc/kubeconfig`,
        'VirtualClusterInstanceKubeConfig',
        {},
      ],
    ] as const) {
      const served = await post(path, { apiVersion: 'management.platform/v2', kind, spec });
      expect(served.status, `${kind}: ${served.text}`).toBe(400);
      expect(served.json).toMatchObject({ kind: 'Status', code: 400, reason: 'BadRequest' });
      expect(served.json.message).toBe(expected.message);
    }
    // Nothing was minted, set or stored.
    const list = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      token: admin,
      dispatcher: env().dispatcher,
    });
    expect(list.json.items).toEqual([]);
  });

  test('kubectl create -f of a DirectClusterEndpointToken file returns the token', async () => {
    const file = join(dir, 'direct-token.yaml');
    writeFileSync(
      file,
      `apiVersion: ${GROUP_VERSION}\nkind: DirectClusterEndpointToken\nmetadata:\n  name: from-file\nspec:\n  ttl: 600\n`,
    );
    const created = await kubectlOn(gatewayConfig, ['create', '-f', file, '-o', 'jsonpath={.status.token}']);
    expect(created.code, created.stderr).toBe(0);
    const [header, payload] = created.stdout.split('.');
    expect(created.stdout.split('.')).toHaveLength(3);
    expect(JSON.parse(Buffer.from(header ?? '', 'base64url').toString())).toMatchObject({ alg: 'ES256' });
    const claims = JSON.parse(Buffer.from(payload ?? '', 'base64url').toString()) as {
      exp: number;
      iat: number;
    };
    expect(claims.exp - claims.iat).toBe(600);
    // As kubectl prints it without an output format.
    const plain = await kubectlOn(gatewayConfig, ['create', '-f', file]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toContain('directclusterendpointtoken.management.platform/');
    expect(plain.stdout).toContain('created');
    // kubectl validated it on the client, from the protobuf OpenAPI v2 document: an unknown field
    // is refused before anything is sent, with kubectl's own message.
    const misspelt = join(dir, 'misspelt-token.yaml');
    writeFileSync(
      misspelt,
      `apiVersion: ${GROUP_VERSION}\nkind: DirectClusterEndpointToken\nspec:\n  ttlSeconds: 600\n`,
    );
    const refused = await kubectlOn(gatewayConfig, ['create', '-f', misspelt]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain(
      'unknown field "ttlSeconds" in platform.management.v1.DirectClusterEndpointToken.spec',
    );
  });

  test('a DirectClusterEndpointToken asking for the deprecated scope fields: kubectl prints a warning for each', async () => {
    const file = join(dir, 'deprecated-scope-token.yaml');
    writeFileSync(
      file,
      `apiVersion: ${GROUP_VERSION}
kind: DirectClusterEndpointToken
spec:
  ttl: 600
  scope:
    allowPlatformCli: true
    rules:
    - verbs: [get]
      resources: [{group: "", resources: [pods]}]
`,
    );
    const created = await kubectlOn(gatewayConfig, ['create', '-f', file, '-o', 'jsonpath={.status.token}']);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout.split('.')).toHaveLength(3);
    expect(created.stderr).toContain('Warning: scope.rules is deprecated');
    expect(created.stderr).toContain('Warning: scope.allowPlatformCli is deprecated');
    const plain = await kubectlOn(gatewayConfig, ['create', '-f', join(dir, 'direct-token.yaml')]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stderr).not.toContain('Warning:');
  });

  test('kubectl create -f of a Config (no PATCH either) is validated on the client and reaches the gateway', async () => {
    const config = (raw: string) =>
      `apiVersion: ${GROUP_VERSION}\nkind: Config\nmetadata:\n  name: config\nspec:\n  raw: ${JSON.stringify(raw)}\n`;
    const dryRun = await kubectlOn(
      gatewayConfig,
      ['create', '--dry-run=server', '-f', '-', '-o', 'jsonpath={.status.projectNamespacePrefix}'],
      config('projectNamespacePrefix: team-\n'),
    );
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toBe('team-');
    const misspelt = await kubectlOn(
      gatewayConfig,
      ['create', '--dry-run=server', '-f', '-'],
      `apiVersion: ${GROUP_VERSION}\nkind: Config\nmetadata:\n  name: config\nspec:\n  rawText: x\n`,
    );
    expect(misspelt.code).not.toBe(0);
    expect(misspelt.stderr).toContain('unknown field "rawText"');
  });

  test('authenticateVersionEndpoint: /version needs a key while set, and is public again once unset', async () => {
    const anonymous = () => call(`${env().base}/version`, { dispatcher: env().dispatcher });
    expect((await anonymous()).status).toBe(200);
    const setConfig = async (raw: string) => {
      const set = await post('/configs', { apiVersion: GROUP_VERSION, kind: 'Config', spec: { raw } });
      expect(set.status, set.text).toBe(201);
    };
    await setConfig('authenticateVersionEndpoint: true\n');
    await eventually(async () => (await anonymous()).status === 401, 20_000, '/version to need a key');
    const refused = await anonymous();
    expect(refused.json).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
    expect(refused.text).not.toContain('gitVersion');
    const withKey = await call(`${env().base}/version`, { token: admin, dispatcher: env().dispatcher });
    expect(withKey.status).toBe(200);
    expect(withKey.json.gitVersion).toMatch(/^v/);
    const version = await kubectlOn(gatewayConfig, ['version', '-o', 'json']);
    expect(version.code, version.stderr).toBe(0);
    expect(JSON.parse(version.stdout).serverVersion.gitVersion).toBe(withKey.json.gitVersion);

    await setConfig('authenticateVersionEndpoint: false\n');
    await eventually(async () => (await anonymous()).status === 200, 20_000, '/version to be public again');
  });
});
