import { randomBytes } from 'node:crypto';
import { request } from 'undici';
import { beforeAll, describe, expect, test } from 'vitest';
import { GROUP_VERSION, PLATFORM_NAMESPACE, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Issue 30: the config endpoint's dry runs were answered by the gateway alone (201, whoever asked,
 * nothing checked past the gateway) and its writes carried no warnings. Now both are the answers
 * of the platform-config Secret write itself. The attacks: a delegated config setter (RBAC:
 * `create`/`update` configs, nothing on the Secret) and a tenant try every dry-run spelling and
 * verb to have a configuration accepted; a configuration crafted to be echoed into the `Warning`
 * headers (a client secret, a connector id carrying a header break or a forged warning) sets
 * nothing of the sort.
 */
describe('security: the config endpoint admits dry runs like writes and echoes nothing', () => {
  const env = useGatewayEnv();
  const secret = `client-secret-${randomBytes(16).toString('hex')}`;
  let admin: string;
  let setter: string;
  let mallory: string;

  const configObject = (raw: string) => ({
    apiVersion: GROUP_VERSION,
    kind: 'Config',
    metadata: { name: 'config' },
    spec: { raw },
  });
  const write = async (token: string, method: 'POST' | 'PUT', raw: string, search = '') => {
    const response = await request(
      `${env().api}/${method === 'PUT' ? 'configs/config' : 'configs'}${search}`,
      {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(configObject(raw)),
      },
    );
    const text = await response.body.text();
    const warning = response.headers.warning;
    return {
      status: response.statusCode,
      text,
      headers: response.headers,
      warnings: warning === undefined ? [] : Array.isArray(warning) ? warning : [warning],
    };
  };
  const storedSecret = async () => {
    const stored = await env()
      .core.readNamespacedSecret({ name: 'platform-config', namespace: PLATFORM_NAMESPACE })
      .catch(() => undefined);
    return { resourceVersion: stored?.metadata?.resourceVersion, data: stored?.data };
  };

  beforeAll(async () => {
    admin = await env().user(uniqueName('root'), { admin: true });
    mallory = await env().user('mallory');
    setter = await env().user('setter');
    await env().rbac.createClusterRole({
      body: {
        metadata: { name: 'config-setter' },
        rules: [
          { apiGroups: ['management.platform'], resources: ['configs'], verbs: ['get', 'create', 'update'] },
        ],
      },
    });
    await env().rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'config-setter' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'config-setter' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:user:setter' }],
      },
    });
    // The stored configuration the attacks must leave as it is.
    const set = await write(admin, 'POST', 'projectNamespacePrefix: team-\n');
    expect(set.status, set.text).toBe(201);
    await eventually(
      async () => (await storedSecret()).data?.config !== undefined,
      20_000,
      'the config stored in its Secret',
    );
    await eventually(
      async () =>
        (await write(setter, 'POST', 'projectNamespacePrefix: x-\n')).text.includes(
          'may not write the Secret',
        ),
      20_000,
      'the setter may create configs (RBAC in force)',
    );
  });

  test('no dry-run spelling or verb gets a configuration accepted where the write is refused, and nothing is stored', async () => {
    const before = await storedSecret();
    const raw = 'projectNamespacePrefix: owned-\n';
    for (const method of ['POST', 'PUT'] as const) {
      const real = await write(setter, method, raw);
      expect(real.status, `${method} as the setter: ${real.text}`).toBe(403);
      expect(real.text).toContain('may not write the Secret platform-config');
      for (const search of ['?dryRun=All', '?dryRun=', '?dryRun=All&dryRun=All', '?dryRun']) {
        const dry = await write(setter, method, raw, search);
        expect({ status: dry.status, text: dry.text }, `${method} ${search} as the setter`).toEqual({
          status: real.status,
          text: real.text,
        });
        const tenant = await write(mallory, method, raw, search);
        expect(tenant.status, `${method} ${search} as a tenant`).toBe(403);
        expect(tenant.warnings, `${method} ${search} as a tenant`).toEqual([]);
      }
    }
    expect(await storedSecret()).toEqual(before);
  });

  test('the Warning headers name fields only: no client secret, no header break, no forged warning', async () => {
    const crafted = `evil"\r\nX-Injected: 1\r\nWarning: 299 - "forged ${secret}`;
    const raw = `auth:
  hostedGit: { clientId: platform, clientSecret: ${secret} }
  connectors:
  - id: ${JSON.stringify(crafted)}
    hostedGit: { clientId: other, clientSecret: ${secret} }
  - { id: hostedGit, hostedGit: { clientId: third, clientSecret: ${secret} } }
platformHost: ${secret}.example.com
`;
    const answer = await write(admin, 'POST', raw, '?dryRun=All');
    expect(answer.status, answer.text).toBe(201);
    expect(answer.headers['x-injected']).toBeUndefined();
    // One warning per inert field, each a field path with its fixed reason.
    expect(answer.warnings.map((value) => /^299 - "([^:]+):/.exec(value)?.[1])).toEqual(
      expect.arrayContaining(['auth.connectors[0].id', 'auth.connectors[1].id', 'platformHost']),
    );
    for (const value of answer.warnings) {
      expect(value).toMatch(/^299 - "[^"\\]*(?:\\.[^"\\]*)*"$/);
      expect(value).not.toContain(secret);
      expect(value).not.toContain('forged');
      expect(value).not.toContain('X-Injected');
    }
  });
});
