import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { kubectl, uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { useGatewayEnv, writeGatewayKubeconfig } from './support.ts';

/**
 * The real kubectl (the control plane's own build) with a kubeconfig whose server is
 * `<gateway>/kubernetes/management` and whose token is an access key: discovery, OpenAPI
 * (`explain`, server-side field validation) and the verbs people use, for sharedsecrets and
 * ownedaccesskeys; a user sees only what RBAC and the key's scope allow.
 */
describe('gateway: kubectl', () => {
  const env = useGatewayEnv({ https: true });
  const namespace = uniqueName('kube');
  const dir = mkdtempSync(join(tmpdir(), 'platform-gateway-kubectl-'));
  let adminConfig: string;
  let bobConfig: string;

  const kubeconfig = (name: string, token: string) => writeGatewayKubeconfig(env(), dir, name, token);
  const run = async (config: string, args: string[], stdin?: string) => {
    const result = await kubectl(['--cache-dir', join(dir, 'cache'), ...args], {
      kubeconfig: config,
      ...(stdin !== undefined ? { stdin } : {}),
    });
    return result;
  };
  const ok = async (config: string, args: string[], stdin?: string) => {
    const result = await run(config, args, stdin);
    expect(result.code, `kubectl ${args.join(' ')}: ${result.stderr}`).toBe(0);
    return result.stdout;
  };

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    adminConfig = kubeconfig('admin', await env().user('kadmin', { admin: true }));
    bobConfig = kubeconfig('bob', await env().user('bob'));
  });

  const secretFile = (name: string, description: string) => {
    const path = join(dir, `${name}.yaml`);
    writeFileSync(
      path,
      `apiVersion: management.platform/v1
kind: SharedSecret
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  description: ${description}
  data:
    token: dG9rZW4=
  access:
  - verbs: ["get"]
    users: ["bob"]
`,
    );
    return path;
  };

  test('create from a file, get, list across namespaces, apply, patch, delete', async () => {
    expect(await ok(adminConfig, ['create', '-f', secretFile('from-file', 'created')])).toContain(
      'sharedsecret.management.platform/from-file created',
    );
    const table = await ok(adminConfig, ['get', 'sharedsecrets.management.platform', '-n', namespace]);
    expect(table).toMatch(/NAME\s+DISPLAY NAME\s+KEYS\s+READY\s+AGE/);
    expect(table).toContain('from-file');
    const all = await ok(adminConfig, ['get', 'ssec', '--all-namespaces', '-o', 'name']);
    expect(all).toContain('sharedsecret.management.platform/from-file');
    const yaml = await ok(adminConfig, ['get', 'sharedsecret', 'from-file', '-n', namespace, '-o', 'yaml']);
    expect(yaml).toContain('description: created');

    expect(await ok(adminConfig, ['apply', '-f', secretFile('from-file', 'applied')])).toContain(
      'configured',
    );
    expect(await ok(adminConfig, ['apply', '-f', secretFile('applied', 'new')])).toContain('created');
    expect(
      await ok(adminConfig, ['apply', '--server-side', '-f', secretFile('applied', 'server-side')]),
    ).toContain('serverside-applied');
    // What `kubectl edit` sends: a patch of the changed fields.
    await ok(adminConfig, [
      'patch',
      'sharedsecret',
      'from-file',
      '-n',
      namespace,
      '--type=json',
      '-p',
      '[{"op":"replace","path":"/spec/description","value":"edited"}]',
    ]);
    await ok(adminConfig, [
      'patch',
      'sharedsecret',
      'applied',
      '-n',
      namespace,
      '--type=merge',
      '-p',
      '{"spec":{"displayName":"Applied"}}',
    ]);
    expect(
      await ok(adminConfig, [
        'get',
        'sharedsecret',
        'from-file',
        '-n',
        namespace,
        '-o',
        'jsonpath={.spec.description}',
      ]),
    ).toBe('edited');

    // Server-side validation through the gateway: unknown fields are refused.
    const strict = await run(
      adminConfig,
      ['create', '-f', '-'],
      `apiVersion: management.platform/v1
kind: SharedSecret
metadata: {name: strict, namespace: ${namespace}}
spec: {nonsense: true}
`,
    );
    expect(strict.code).not.toBe(0);
    expect(strict.stderr).toMatch(/unknown field|nonsense/);

    // bob sees what the projected Roles give him, nothing more.
    await eventually(
      async () => (await run(bobConfig, ['get', 'sharedsecret', 'from-file', '-n', namespace])).code === 0,
      30_000,
      'bob to get the secret',
    );
    const denied = await run(bobConfig, ['get', 'sharedsecrets', '-n', namespace]);
    expect(denied.code).not.toBe(0);
    expect(denied.stderr).toContain('forbidden');
    expect((await run(bobConfig, ['delete', 'sharedsecret', 'from-file', '-n', namespace])).code).not.toBe(0);

    expect(
      await ok(adminConfig, ['delete', 'sharedsecret', 'applied', '-n', namespace, '--wait=false']),
    ).toContain('deleted');
  });

  test('a key scoped to a project works with kubectl there (discovery included), and only there', async () => {
    await env().custom.createClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'projects',
      body: { apiVersion: 'management.platform/v1', kind: 'Project', metadata: { name: 'shop' }, spec: {} },
    });
    await env().core.createNamespace({ body: { metadata: { name: 'p-shop' } } });
    const scoped = kubeconfig(
      'scoped',
      await env().key({ user: 'kadmin', scope: { projects: [{ project: 'shop' }] } }),
    );
    // No platform-cli role: discovery is readable all the same.
    await eventually(
      async () => (await run(scoped, ['get', 'sharedsecrets', '-n', 'p-shop'])).code === 0,
      30_000,
      'the scoped key to list in its project',
    );
    expect(await ok(scoped, ['api-resources', '--api-group', 'management.platform', '-o', 'name'])).toContain(
      'sharedsecrets.management.platform',
    );
    const elsewhere = await run(scoped, ['get', 'sharedsecrets', '-n', namespace]);
    expect(elsewhere.code).not.toBe(0);
    expect(elsewhere.stderr).toMatch(/forbidden/i);
  });

  test('explain from the OpenAPI documents', async () => {
    const explain = await ok(adminConfig, ['explain', 'sharedsecrets.spec.access']);
    expect(explain).toContain('Access rights for users and teams');
    expect(explain).toContain('verbs');
    expect(await ok(adminConfig, ['explain', 'ownedaccesskeys.spec.ttl'])).toContain(
      'Time to live in seconds',
    );
  });

  test('ownedaccesskeys: create from a file shows the key once; get, patch, delete; only your own', async () => {
    const file = join(dir, 'key.yaml');
    writeFileSync(
      file,
      'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  name: bob-ci\nspec:\n  displayName: CI\n',
    );
    const created = await ok(bobConfig, ['create', '-f', file, '-o', 'jsonpath={.spec.key}']);
    expect(created).toMatch(/^pak_[a-z2-7]{16}_[0-9A-Za-z]{49}$/);
    const got = await ok(bobConfig, ['get', 'ownedaccesskey', 'bob-ci', '-o', 'yaml']);
    expect(got).not.toContain(created);
    expect(got).toContain('user: bob');
    const list = await ok(bobConfig, ['get', 'oak', '-o', 'name']);
    expect(list).toContain('ownedaccesskey.management.platform/bob-ci');
    expect(list).not.toContain('kadmin');
    await ok(bobConfig, [
      'patch',
      'oak',
      'bob-ci',
      '--type=json',
      '-p',
      '[{"op":"add","path":"/spec/description","value":"x"}]',
    ]);
    const everything = await ok(adminConfig, ['get', 'oak', '-o', 'name']);
    expect(everything).toContain('bob-ci');
    const adminKeys = await ok(adminConfig, [
      'get',
      'oak',
      '-o',
      'jsonpath={range .items[?(@.spec.user=="kadmin")]}{.metadata.name}{"\\n"}{end}',
    ]);
    const adminKey = adminKeys.split('\n').filter(Boolean)[0]!;
    expect((await run(bobConfig, ['get', 'oak', adminKey])).code).not.toBe(0);
    expect(await ok(adminConfig, ['get', 'oak', adminKey, '-o', 'name'])).toContain(adminKey);
    expect(await ok(bobConfig, ['delete', 'oak', 'bob-ci', '--wait=false'])).toContain('deleted');
  });
});
