import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { request } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import { Upstream } from '../../src/gateway/proxy/upstream.ts';
import { kubectl } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { GROUP_VERSION, PLATFORM_NAMESPACE, useGatewayEnv, writeGatewayKubeconfig } from './support.ts';

/**
 * Setting the platform configuration through the spec's own endpoint (`POST .../configs`) answers
 * what writing the `platform-config` Secret answers: the apiserver's `Warning` headers, one per
 * field that has no effect (as the platform-config admission says them), which kubectl prints; and
 * `?dryRun=All` is admitted like a real write (RBAC, admission, installation policies) and stores
 * nothing. Secrets in the configuration (client secrets) never appear in any of it.
 */
describe('gateway: the config endpoint says what it ignores, and a dry run is admitted like a write', () => {
  const env = useGatewayEnv({ https: true });
  const dir = mkdtempSync(join(tmpdir(), 'platform-gateway-config-'));
  // Client secrets of working and of inert sections; never to be echoed.
  const secrets = [1, 2].map((i) => `client-secret-${i}-${randomBytes(12).toString('hex')}`);
  /**
   * Fields that have no effect here (kept to ones no work in progress makes effective) beside
   * working ones, among them a connector whose id another section takes.
   */
  const inertConfig = `projectNamespacePrefix: team-
platformHost: platform.example.com
apps: { noDefault: true }
uiSettings: { primaryColor: "#fff" }
auth:
  hostedGit: { clientId: platform, clientSecret: ${secrets[0]} }
  connectors:
  - { id: hostedGit, displayName: Git, hostedGit: { clientId: other, clientSecret: ${secrets[1]} } }
`;
  const inertFields = ['platformHost', 'apps', 'uiSettings.primaryColor', 'auth.connectors[0].id'];
  let admin: string;

  const configObject = (raw: string) => ({
    apiVersion: GROUP_VERSION,
    kind: 'Config',
    metadata: { name: 'config' },
    spec: { raw },
  });

  /** A raw write of the config (POST, or PUT to a name), with every `Warning` header value as sent. */
  const write = async (
    token: string,
    raw: string,
    search = '',
    put?: { url: string; object?: Record<string, unknown> },
  ) => {
    const response = await request(`${env().api}/${put ? put.url : 'configs'}${search}`, {
      method: put ? 'PUT' : 'POST',
      dispatcher: env().dispatcher,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(put?.object ?? configObject(raw)),
    });
    const text = await response.body.text();
    const warning = response.headers.warning;
    return {
      status: response.statusCode,
      text,
      // biome-ignore lint/suspicious/noExplicitAny: test convenience
      json: JSON.parse(text) as any,
      warnings: warning === undefined ? [] : Array.isArray(warning) ? warning : [warning],
    };
  };
  const post = (token: string, raw: string, search = '') => write(token, raw, search);

  /** The texts of kube-apiserver's `299 - "<text>"` warning values (quotes and backslashes escaped). */
  const warningTexts = (values: readonly string[]) =>
    values.map((value) => {
      const match = /^299 - "((?:[^"\\]|\\.)*)"$/.exec(value);
      expect(match, `a kube-apiserver warning: ${value}`).not.toBeNull();
      return match![1]!.replace(/\\(.)/g, '$1');
    });
  const fieldsOf = (texts: readonly string[]) => texts.map((text) => text.slice(0, text.indexOf(':')));

  /** The stored Secret, read from the apiserver directly. */
  const storedSecret = async () => {
    const secret = await env()
      .core.readNamespacedSecret({ name: 'platform-config', namespace: PLATFORM_NAMESPACE })
      .catch(() => undefined);
    return {
      resourceVersion: secret?.metadata?.resourceVersion,
      raw:
        secret?.data?.config === undefined ? undefined : Buffer.from(secret.data.config, 'base64').toString(),
    };
  };

  const kubeconfig = (name: string, token: string) => writeGatewayKubeconfig(env(), dir, name, token);
  const configFile = (name: string, raw: string) => {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(
      path,
      `apiVersion: ${GROUP_VERSION}
kind: Config
metadata:
  name: config
spec:
  raw: |
${raw
  .split('\n')
  .map((line) => (line === '' ? '' : `    ${line}`))
  .join('\n')}`,
    );
    return path;
  };
  const runKubectl = (config: string, args: string[]) =>
    kubectl(['--cache-dir', join(dir, 'cache'), ...args], { kubeconfig: config });
  const PLATFORM_HOST_WARNING =
    'platformHost: accepted; has no effect in this platform (the gateway takes its URL from its flags and the request)';

  /**
   * One kubectl write of the config (`create`, `create --dry-run=server`, `replace`; with
   * `--validate=false`: kubectl validates a kind whose OpenAPI has no PATCH operation (Config is
   * get and create only) on the client, through the protobuf OpenAPI v2, which the gateway does
   * not serve; the gateway validates the object itself). It succeeds, says `outcome`, prints a
   * `Warning:` line for every inert field, and no secret anywhere.
   */
  const kubectlWrites = async (
    config: string,
    run: { args: string[]; file: string; raw: string; outcome: string },
  ) => {
    const result = await runKubectl(config, [
      ...run.args,
      '--validate=false',
      '-f',
      configFile(run.file, run.raw),
    ]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`config.management.platform/config ${run.outcome}`);
    const printed = result.stderr
      .split('\n')
      .filter((line) => line.startsWith('Warning: '))
      .map((line) => line.slice('Warning: '.length));
    for (const field of inertFields) expect(fieldsOf(printed)).toContain(field);
    expect(printed).toContain(PLATFORM_HOST_WARNING);
    for (const secret of secrets) expect(result.stderr + result.stdout).not.toContain(secret);
  };

  /** Admission's warnings for every inert field, and no secret among them. */
  const expectInertWarnings = (warnings: readonly string[]) => {
    expect(fieldsOf(warningTexts(warnings))).toEqual(expect.arrayContaining(inertFields));
    for (const secret of secrets) expect(warnings.join('\n')).not.toContain(secret);
  };
  const storedEventually = (raw: string) =>
    eventually(async () => (await storedSecret()).raw === raw, 20_000, 'the config stored in its Secret');

  beforeAll(async () => {
    admin = await env().user('config-admin', { admin: true });
  });

  test('POST answers a kube-apiserver Warning header for every inert field, the same the Secret write gets, and none echoes a secret', async () => {
    const set = await post(admin, inertConfig);
    expect(set.status, set.text).toBe(201);
    const texts = warningTexts(set.warnings);
    for (const field of inertFields) {
      expect(
        fieldsOf(texts).filter((each) => each === field),
        `one warning for ${field}`,
      ).toHaveLength(1);
    }
    for (const text of texts)
      expect(text).toMatch(/accepted; (this connector )?has no effect in this platform/);
    expect(texts).toContain(
      'auth.connectors[0].id: accepted; this connector has no effect in this platform (the id "hostedGit" is taken by auth.hostedGit)',
    );
    await storedEventually(inertConfig);

    // One source of truth: exactly what the apiserver answers an admin writing the Secret itself.
    const upstream = await Upstream.create(env().kc);
    try {
      const direct = await upstream.json({
        method: 'PATCH',
        path: `/api/v1/namespaces/${PLATFORM_NAMESPACE}/secrets/platform-config`,
        search: '?dryRun=All',
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ data: { config: Buffer.from(inertConfig).toString('base64') } }),
      });
      expect(direct.statusCode).toBe(200);
      expect(set.warnings).toEqual(direct.warnings);
    } finally {
      await upstream.close();
    }

    // A configuration with nothing inert: no Warning header at all.
    const plain = await post(admin, 'projectNamespacePrefix: team-\n');
    expect(plain.status, plain.text).toBe(201);
    expect(plain.warnings).toEqual([]);

    for (const secret of secrets) {
      expect(set.warnings.join('\n')).not.toContain(secret);
      // The secret was there to echo: the answer's body is the admin's own configuration.
      expect(set.text).toContain(secret);
    }
  });

  test('kubectl create -f prints each warning; --dry-run=server prints them too and stores nothing', async () => {
    const config = kubeconfig('admin', admin);
    await kubectlWrites(config, { args: ['create'], file: 'inert', raw: inertConfig, outcome: 'created' });
    await storedEventually(inertConfig);

    const before = await storedSecret();
    const changed = inertConfig.replace('projectNamespacePrefix: team-', 'projectNamespacePrefix: dry-');
    await kubectlWrites(config, {
      args: ['create', '--dry-run=server'],
      file: 'dry',
      raw: changed,
      outcome: 'created (server dry run)',
    });
    expect(await storedSecret()).toEqual(before);
  });

  test('?dryRun=All is admitted like a real write: the same warnings, the same refusals, nothing stored', async () => {
    const settled = await post(admin, 'projectNamespacePrefix: team-\n');
    expect(settled.status, settled.text).toBe(201);
    await storedEventually('projectNamespacePrefix: team-\n');
    const before = await storedSecret();

    // A valid dry run: answered with the configuration and admission's warnings; nothing stored.
    const dry = await post(admin, inertConfig, '?dryRun=All');
    expect(dry.status, dry.text).toBe(201);
    expect(dry.json.status.projectNamespacePrefix).toBe('team-');
    expectInertWarnings(dry.warnings);
    expect(await storedSecret()).toEqual(before);
    const read = await request(`${env().api}/configs/config`, {
      dispatcher: env().dispatcher,
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(((await read.body.json()) as { spec: { raw: string } }).spec.raw).toBe(before.raw);

    // A dry-run value kube-apiserver does not know is refused as it refuses it, not taken for a write.
    const unknown = await post(admin, 'projectNamespacePrefix: nope-\n', '?dryRun=Some');
    expect(unknown.status, unknown.text).toBe(422);
    expect(unknown.json).toMatchObject({
      kind: 'Status',
      reason: 'Invalid',
      details: { causes: [{ field: 'dryRun', reason: 'FieldValueNotSupported' }] },
    });
    expect(await storedSecret()).toEqual(before);

    // An invalid configuration: the same 422 with field paths, dry or not.
    const invalid = 'audit:\n  enabled: true\n';
    const realInvalid = await post(admin, invalid);
    const dryInvalid = await post(admin, invalid, '?dryRun=All');
    expect(realInvalid.status).toBe(422);
    expect(dryInvalid.json).toEqual(realInvalid.json);
    expect(dryInvalid.json.details.causes[0].field).toContain('audit.path');

    // RBAC lets dora set the config (create configs) but not write the Secret it is kept in.
    const dora = await env().user('dora');
    await env().rbac.createClusterRole({
      body: {
        metadata: { name: 'config-setter-dora' },
        rules: [{ apiGroups: ['management.platform'], resources: ['configs'], verbs: ['get', 'create'] }],
      },
    });
    await env().rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'config-setter-dora' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'config-setter-dora' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:user:dora' }],
      },
    });
    const doraRaw = 'projectNamespacePrefix: dora-\n';
    await eventually(
      async () => (await post(dora, doraRaw)).json?.message?.includes('may not write the Secret') === true,
      20_000,
      'dora may create configs but not write the Secret',
    );
    const doraReal = await post(dora, doraRaw);
    const doraDry = await post(dora, doraRaw, '?dryRun=All');
    expect(doraReal.json.message).toContain('may not write the Secret platform-config');
    expect({ status: doraDry.status, json: doraDry.json }).toEqual({
      status: doraReal.status,
      json: doraReal.json,
    });
    expect(await storedSecret()).toEqual(before);
  });

  test("PUT (kubectl replace) answers the same warnings and dry runs; a name other than the URL's is refused", async () => {
    const replaced = await write(admin, inertConfig, '', { url: 'configs/config' });
    expect(replaced.status, replaced.text).toBe(200);
    expect(replaced.json).toMatchObject({ kind: 'Config', metadata: { name: 'config' } });
    expectInertWarnings(replaced.warnings);
    await storedEventually(inertConfig);

    const before = await storedSecret();
    const changed = inertConfig.replace('projectNamespacePrefix: team-', 'projectNamespacePrefix: put-');
    const dry = await write(admin, changed, '?dryRun=All', { url: 'config/config' });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.warnings).toEqual(replaced.warnings);
    expect(await storedSecret()).toEqual(before);

    const elsewhere = await write(admin, changed, '', {
      url: 'configs/other',
      object: configObject(changed),
    });
    expect(elsewhere.status, elsewhere.text).toBe(400);
    expect(elsewhere.json.message).toBe(
      'the name of the object (config) does not match the name on the URL (other)',
    );
    expect(await storedSecret()).toEqual(before);

    await kubectlWrites(kubeconfig('replacer', admin), {
      args: ['replace'],
      file: 'replace',
      raw: inertConfig,
      outcome: 'replaced',
    });
  });

  test("an installation's admission policy refusing the Secret write refuses the dry run with the same Status", async () => {
    // A policy of the installation, not the platform's: a change freeze for one platform admin,
    // whose writes of the platform-config Secret are refused. The gateway's own checks pass them.
    const vera = await env().user('vera', { admin: true });
    const policy = 'config-change-freeze';
    const admission = env().kc.makeApiClient(AdmissionregistrationV1Api);
    await admission.createValidatingAdmissionPolicy({
      body: {
        metadata: { name: policy },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [
              {
                apiGroups: [''],
                apiVersions: ['v1'],
                operations: ['CREATE', 'UPDATE'],
                resources: ['secrets'],
              },
            ],
          },
          matchConditions: [
            { name: 'platform-config', expression: "object.metadata.name == 'platform-config'" },
          ],
          validations: [
            {
              expression: "!('platform:user:vera' in request.userInfo.groups)",
              message: 'a change freeze holds for vera',
              reason: 'Invalid',
            },
          ],
        },
      },
    });
    await admission.createValidatingAdmissionPolicyBinding({
      body: { metadata: { name: policy }, spec: { policyName: policy, validationActions: ['Deny'] } },
    });
    const before = await storedSecret();
    const raw = before.raw ?? '';
    // The policy is in force (the apiserver loads policies asynchronously): a real write of the
    // text already stored is refused.
    await eventually(async () => (await post(vera, raw)).status === 422, 60_000, 'the policy to be in force');
    const real = await post(vera, raw);
    const dry = await post(vera, 'projectNamespacePrefix: frozen-\n', '?dryRun=All');
    expect(real.json).toMatchObject({
      kind: 'Status',
      code: 422,
      reason: 'Invalid',
      message: expect.stringContaining(`ValidatingAdmissionPolicy '${policy}'`),
    });
    expect(real.json.message).toContain('a change freeze holds for vera');
    expect({ status: dry.status, json: dry.json }).toEqual({ status: real.status, json: real.json });
    expect((await storedSecret()).raw).toBe(raw);
    // Others still set it.
    expect((await post(admin, raw, '?dryRun=All')).status).toBe(201);
  });
});
