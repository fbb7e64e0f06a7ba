import { crc32 } from 'node:zlib';
import { beforeAll, describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { EXPIRED_MESSAGE, UNAUTHORIZED_MESSAGE } from '../../src/api/status.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { call, GROUP_VERSION, useGatewayEnv } from './support.ts';

/**
 * The spec's Endpoints table, call by call, with the headers and bodies it shows (YAML bodies,
 * `Authorization: Bearer <ACCESS_KEY>`, JSON patch), through the gateway against a real
 * kube-apiserver; then the errors, limits and the other endpoints of the management API.
 */
describe('gateway: the spec Endpoints table', () => {
  const env = useGatewayEnv();
  const namespace = uniqueName('team-a');
  let admin: string;
  let alice: string;

  beforeAll(async () => {
    await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    admin = await env().user('root', { admin: true });
    alice = await env().user('alice');
  });

  const secretYaml = (name: string, extra = '') => `apiVersion: management.platform/v1
kind: SharedSecret
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  displayName: My Global Secret
  description: Secret Data is base64 encoded.
  data:
    password: cGFzc3dvcmQ=
  access:
    - name: readers
      verbs: ["get"]
      users: ["alice"]
${extra}`;

  test('GET namespaces/<ns>/sharedsecrets lists SharedSecret objects', async () => {
    const answer = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token: admin });
    expect(answer.status).toBe(200);
    expect(answer.json.kind).toBe('SharedSecretList');
    expect(answer.json.apiVersion).toBe(GROUP_VERSION);
    expect(answer.json.items).toEqual([]);
    expect(answer.json.metadata.resourceVersion).toBeTruthy();
  });

  test('POST a SharedSecret as application/yaml, GET it, PUT it, JSON-patch it, DELETE it', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets`;
    const created = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: secretYaml('my-global-secret'),
    });
    expect(created.status, created.text).toBe(201);
    expect(created.json.kind).toBe('SharedSecret');
    expect(created.json.metadata.name).toBe('my-global-secret');
    expect(created.json.spec.data.password).toBe('cGFzc3dvcmQ=');

    // The controller writes the status once it projected the access rules; then the object rests
    // (the same resourceVersion a second later: a busy machine may still be reconciling).
    let read = await call(`${url}/my-global-secret`, { token: admin });
    await eventually(
      async () => {
        const before = await call(`${url}/my-global-secret`, { token: admin });
        await new Promise((resolve) => setTimeout(resolve, 1000));
        read = await call(`${url}/my-global-secret`, { token: admin });
        return (
          (read.json.status?.conditions ?? []).length > 0 &&
          read.json.metadata.resourceVersion === before.json.metadata.resourceVersion
        );
      },
      30_000,
      'the SharedSecret status, then rest',
    );
    expect(read.status).toBe(200);
    expect(read.json.metadata.uid).toBe(created.json.metadata.uid);

    const rv = read.json.metadata.resourceVersion as string;
    const updated = await call(`${url}/my-global-secret`, {
      method: 'PUT',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: secretYaml('my-global-secret')
        .replace(`namespace: ${namespace}\n`, `namespace: ${namespace}\n  resourceVersion: "${rv}"\n`)
        .replace('My Global Secret', 'Renamed'),
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json.spec.displayName).toBe('Renamed');

    const stale = await call(`${url}/my-global-secret`, {
      method: 'PUT',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: secretYaml('my-global-secret').replace(
        `namespace: ${namespace}\n`,
        `namespace: ${namespace}\n  resourceVersion: "${rv}"\n`,
      ),
    });
    expect(stale.status).toBe(409);
    expect(stale.json).toMatchObject({ kind: 'Status', status: 'Failure', reason: 'Conflict', code: 409 });

    const patched = await call(`${url}/my-global-secret`, {
      method: 'PATCH',
      token: admin,
      headers: { 'Content-Type': 'application/json-patch+json' },
      body: JSON.stringify([{ op: 'add', path: '/spec/data/username', value: 'YWRtaW4=' }]),
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.spec.data).toEqual({ password: 'cGFzc3dvcmQ=', username: 'YWRtaW4=' });

    const deleted = await call(`${url}/my-global-secret`, { method: 'DELETE', token: admin });
    expect(deleted.status).toBe(200);
    expect(deleted.json.metadata?.deletionTimestamp ?? deleted.json.kind).toBeTruthy();
    // Deleted at once or after the controller's cleanup; then the object is gone.
    let gone = await call(`${url}/my-global-secret`, { token: admin });
    await eventually(
      async () => {
        gone = await call(`${url}/my-global-secret`, { token: admin });
        return gone.status === 404;
      },
      30_000,
      'the SharedSecret to be deleted',
    );
    expect(gone.json).toMatchObject({ kind: 'Status', reason: 'NotFound', code: 404 });
  });

  test('GET projects/<project>/members', async () => {
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: 'web' },
        spec: { owner: { user: 'alice' }, members: [{ kind: 'User', name: 'root', clusterRole: 'viewer' }] },
      },
    });
    const answer = await call(`${env().api}/projects/web/members`, { token: admin });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json).toMatchObject({ apiVersion: GROUP_VERSION, kind: 'ProjectMembers' });
    // root is a platform admin: not listed.
    expect(answer.json.users).toEqual([
      { info: { name: 'alice', displayName: 'ALICE', username: 'alice', email: 'alice@example.com' } },
    ]);
    expect(answer.json.teams).toEqual([]);
    // The owner lists the members too (members hold no `get` on the Project itself).
    const owner = await call(`${env().api}/projects/web/members`, { token: alice });
    expect(owner.status, owner.text).toBe(200);
    expect(owner.json.users).toEqual(answer.json.users);
    // An outsider may not, and cannot tell a project that exists from one that does not.
    const outsider = await env().user(uniqueName('outsider'));
    for (const project of ['web', 'no-such-project']) {
      const denied = await call(`${env().api}/projects/${project}/members`, { token: outsider });
      expect(denied.status).toBe(403);
      expect(denied.json.kind).toBe('Status');
    }
  });

  // Served (e2e/gateway/kubeconfig.test.ts covers instances that exist); here the spec's call on
  // an instance that does not exist.
  test('POST virtualclusterinstances/<name>/kubeconfig of an instance that does not exist: 404 naming it', async () => {
    const answer = await call(`${env().api}/namespaces/${namespace}/virtualclusterinstances/vc/kubeconfig`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: 'apiVersion: management.platform/v1\nkind: VirtualClusterInstanceKubeConfig\nspec:\n  certificateTTL: 3600\n',
    });
    expect(answer.status).toBe(404);
    expect(answer.json).toMatchObject({
      kind: 'Status',
      code: 404,
      reason: 'NotFound',
      message: 'virtualclusterinstances.management.platform "vc" not found',
    });
  });

  test('YAML responses when the client accepts them', async () => {
    const answer = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, {
      token: admin,
      headers: { Accept: 'application/yaml' },
    });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('content-type')).toContain('application/yaml');
    expect(parseYaml(answer.text).kind).toBe('SharedSecretList');
  });

  test('401 with the same body for missing, malformed, unknown, wrong and disabled keys; expired says so', async () => {
    const disabled = await env().key({ user: 'alice', disabled: true });
    const expired = await env().key({ user: 'alice', ttl: 1 });
    const wrong = withChecksum(`${alice.slice(0, 21)}${'0'.repeat(43)}`);
    const unknown = (await import('../../src/identity/keys.ts')).generateAccessKey((n) =>
      new Uint8Array(n).fill(7),
    ).key;
    const bodies = new Set<string>();
    for (const token of [undefined, 'not-a-key', unknown, wrong, disabled]) {
      const answer = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token });
      expect(answer.status).toBe(401);
      bodies.add(answer.text);
    }
    expect(bodies.size).toBe(1);
    expect(JSON.parse([...bodies][0]!)).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: UNAUTHORIZED_MESSAGE,
      reason: 'Unauthorized',
      code: 401,
    });
    await eventually(
      async () => {
        const answer = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token: expired });
        return answer.status === 401 && answer.json.message === EXPIRED_MESSAGE;
      },
      20_000,
      'the expired key to be refused as expired',
    );
  });

  test('RBAC decides, including the Roles projected from SharedSecrets', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets`;
    const created = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: secretYaml('for-alice'),
    });
    expect(created.status, created.text).toBe(201);
    await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'not-for-alice' }, spec: { data: { a: 'YQ==' } } }),
    });
    await eventually(
      async () => (await call(`${url}/for-alice`, { token: alice })).status === 200,
      30_000,
      'the projected Role',
    );
    const mine = await call(`${url}/for-alice`, { token: alice });
    expect(mine.json.spec.data.password).toBe('cGFzc3dvcmQ=');
    const other = await call(`${url}/not-for-alice`, { token: alice });
    expect(other.status).toBe(403);
    expect(other.json).toMatchObject({ kind: 'Status', reason: 'Forbidden', code: 403 });
    // get only: alice may not change it.
    const write = await call(`${url}/for-alice`, {
      method: 'PATCH',
      token: alice,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { description: 'mine now' } }),
    });
    expect(write.status).toBe(403);
  });

  test('GET sharedsecrets across namespaces, with selectors and pagination; watch streams', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets`;
    for (const name of ['page-1', 'page-2', 'page-3']) {
      const answer = await call(url, {
        method: 'POST',
        token: admin,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ metadata: { name, labels: { page: 'yes' } }, spec: { data: { a: 'YQ==' } } }),
      });
      expect(answer.status).toBe(201);
    }
    const all = await call(`${env().api}/sharedsecrets`, { token: admin });
    expect(all.status).toBe(200);
    expect(all.json.kind).toBe('SharedSecretList');
    expect(all.json.items.map((item: { metadata: { name: string } }) => item.metadata.name)).toEqual(
      expect.arrayContaining(['page-1', 'page-2', 'page-3']),
    );
    const first = await call(`${env().api}/sharedsecrets?labelSelector=page%3Dyes&limit=2`, { token: admin });
    expect(first.json.items).toHaveLength(2);
    expect(first.json.metadata.continue).toBeTruthy();
    const second = await call(
      `${env().api}/sharedsecrets?labelSelector=page%3Dyes&limit=2&continue=${encodeURIComponent(first.json.metadata.continue)}`,
      { token: admin },
    );
    expect(second.json.items).toHaveLength(1);
    const byField = await call(`${url}?fieldSelector=metadata.name%3Dpage-2`, { token: admin });
    expect(byField.json.items.map((item: { metadata: { name: string } }) => item.metadata.name)).toEqual([
      'page-2',
    ]);

    // alice cannot list across namespaces: RBAC refuses.
    expect((await call(`${env().api}/sharedsecrets`, { token: alice })).status).toBe(403);

    const controller = new AbortController();
    const response = await fetch(
      `${url}?watch=true&labelSelector=page%3Dyes&resourceVersion=${second.json.metadata.resourceVersion}`,
      {
        headers: { authorization: `Bearer ${admin}` },
        signal: controller.signal,
      },
    );
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const touched = await call(`${url}/page-3`, {
      method: 'PATCH',
      token: admin,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { annotations: { touched: 'yes' } } }),
    });
    expect(touched.status).toBe(200);
    let text = '';
    const deadline = Date.now() + 15_000;
    while (!text.includes('touched') && Date.now() < deadline) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    controller.abort();
    const events = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.some((event) => event.type === 'MODIFIED' && event.object.metadata.name === 'page-3')).toBe(
      true,
    );
  });

  test('limits and bad input: 413, 400, 404, 415, 422, all as Status; nothing half-applies', async () => {
    const url = `${env().api}/namespaces/${namespace}/sharedsecrets`;
    const big = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'big' }, spec: { data: { a: 'A'.repeat(3 * 1024 * 1024) } } }),
    });
    expect(big.status).toBe(413);
    expect(big.json).toMatchObject({ kind: 'Status', reason: 'RequestEntityTooLarge', code: 413 });
    const yaml = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: 'metadata: [unclosed',
    });
    expect(yaml.status).toBe(400);
    expect(yaml.json).toMatchObject({ kind: 'Status', reason: 'BadRequest' });
    const json = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: '{"metadata":',
    });
    expect(json.status).toBe(400);
    const patch = await call(`${url}/page-1`, {
      method: 'PATCH',
      token: admin,
      headers: { 'Content-Type': 'application/json-patch+json' },
      body: JSON.stringify([{ op: 'frobnicate', path: '/spec' }]),
    });
    expect(patch.status).toBe(400);
    // A patch whose second operation fails changes nothing.
    const before = await call(`${url}/page-1`, { token: admin });
    const partial = await call(`${url}/page-1`, {
      method: 'PATCH',
      token: admin,
      headers: { 'Content-Type': 'application/json-patch+json' },
      body: JSON.stringify([
        { op: 'add', path: '/spec/description', value: 'half' },
        { op: 'remove', path: '/spec/does/not/exist' },
      ]),
    });
    expect(partial.status).toBeGreaterThanOrEqual(400);
    expect(partial.status).toBeLessThan(500);
    const after = await call(`${url}/page-1`, { token: admin });
    expect(after.json.metadata.resourceVersion).toBe(before.json.metadata.resourceVersion);
    expect(after.json.spec.description).toBeUndefined();

    const badNamespace = await call(`${env().api}/namespaces/Not_A_Namespace/sharedsecrets`, {
      token: admin,
    });
    expect([400, 422]).toContain(badNamespace.status);
    expect(badNamespace.json.kind).toBe('Status');
    const badName = await call(`${url}/Bad_Name`, { token: admin });
    expect([400, 422]).toContain(badName.status);
    const badBodyName = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'Bad_Name' }, spec: {} }),
    });
    expect(badBodyName.status).toBe(422);
    expect(badBodyName.json.kind).toBe('Status');
    for (const path of [
      '/nope',
      '/apis/other.group/v1/things',
      '/apis/management.platform/v1/widgets',
      '/apis/management.platform/v1/namespaces/x/sharedsecrets/a/b/c',
    ]) {
      const answer = await call(`${env().base}${path}`, { token: admin });
      expect(answer.status, path).toBe(404);
      expect(answer.json.kind).toBe('Status');
    }
    const media = await call(url, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'text/plain' },
      body: 'hello',
    });
    expect(media.status).toBe(415);
  });

  test('scopes narrow: 403 with the reason', async () => {
    const scoped = await env().key({ user: 'root', scope: { projects: [{ project: 'web' }] } });
    await eventually(
      async () => (await call(`${env().api}/projects/web/members`, { token: scoped })).status === 200,
      20_000,
      'the scoped key',
    );
    const denied = await call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token: scoped });
    expect(denied.status).toBe(403);
    expect(denied.json).toMatchObject({ kind: 'Status', reason: 'Forbidden', code: 403 });
    expect(denied.json.message).toContain('scope does not allow list sharedsecrets.management.platform');
  });

  test('ownedaccesskeys: create returns the key once; callers see only their own keys; admins see all', async () => {
    const url = `${env().api}/ownedaccesskeys`;
    const created = await call(url, {
      method: 'POST',
      token: alice,
      headers: { 'Content-Type': 'application/yaml' },
      body: 'apiVersion: management.platform/v1\nkind: OwnedAccessKey\nmetadata:\n  generateName: ci-\nspec:\n  displayName: CI\n  ttl: 3600\n',
    });
    expect(created.status, created.text).toBe(201);
    const plaintext = created.json.spec.key as string;
    expect(plaintext).toMatch(/^pak_[a-z2-7]{16}_[0-9A-Za-z]{49}$/);
    expect(created.json.spec.user).toBe('alice');
    expect(created.json.spec.keyHash).toMatch(/^[a-f0-9]{64}$/);
    const name = created.json.metadata.name as string;
    expect(name.startsWith('ci-')).toBe(true);
    // The new key works, and is never shown again.
    await env().accepted(plaintext);
    const read = await call(`${url}/${name}`, { token: plaintext });
    expect(read.status).toBe(200);
    expect(read.json.spec.key).toBeUndefined();
    expect(read.text).not.toContain(plaintext.slice(21));

    const list = await call(url, { token: alice });
    expect(list.status).toBe(200);
    const names = list.json.items.map((item: { metadata: { name: string } }) => item.metadata.name);
    expect(names).toContain(name);
    expect(list.json.items.every((item: { spec: { user: string } }) => item.spec.user === 'alice')).toBe(
      true,
    );
    const all = await call(url, { token: admin });
    expect(all.json.items.some((item: { spec: { user: string } }) => item.spec.user === 'root')).toBe(true);

    // Someone else's key does not exist for alice.
    const rootKeys = all.json.items.filter((item: { spec: { user: string } }) => item.spec.user === 'root');
    const foreign = await call(`${url}/${rootKeys[0].metadata.name}`, { token: alice });
    expect(foreign.status).toBe(404);
    const foreignDelete = await call(`${url}/${rootKeys[0].metadata.name}`, {
      method: 'DELETE',
      token: alice,
    });
    expect(foreignDelete.status).toBe(404);
    const forOthers = await call(url, {
      method: 'POST',
      token: alice,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'for-root' }, spec: { user: 'root' } }),
    });
    expect(forOthers.status).toBe(403);
    const escalate = await call(url, {
      method: 'POST',
      token: alice,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ metadata: { name: 'escalate' }, spec: { groups: ['cluster-admins'] } }),
    });
    expect(escalate.status).toBe(403);

    // Update and JSON patch of her own key; delete by name.
    const patched = await call(`${url}/${name}`, {
      method: 'PATCH',
      token: alice,
      headers: { 'Content-Type': 'application/json-patch+json' },
      body: JSON.stringify([{ op: 'replace', path: '/spec/displayName', value: 'CI key' }]),
    });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.spec.displayName).toBe('CI key');
    const sneaky = await call(`${url}/${name}`, {
      method: 'PATCH',
      token: alice,
      headers: { 'Content-Type': 'application/merge-patch+json' },
      body: JSON.stringify({ spec: { groups: ['system:masters-ish'] } }),
    });
    expect(sneaky.status).toBe(403);
    const current = await call(`${url}/${name}`, { token: alice });
    const updated = await call(`${url}/${name}`, {
      method: 'PUT',
      token: alice,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...current.json, spec: { ...current.json.spec, description: 'updated' } }),
    });
    expect(updated.status, updated.text).toBe(200);
    expect(updated.json.spec.description).toBe('updated');

    const keys = await call(`${env().api}/users/alice/accesskeys`, { token: alice });
    expect(keys.status).toBe(200);
    expect(keys.json.kind).toBe('UserAccessKeys');
    expect(keys.json.accessKeys.map((key: { metadata: { name: string } }) => key.metadata.name)).toContain(
      name,
    );
    expect((await call(`${env().api}/users/root/accesskeys`, { token: alice })).status).toBe(403);
    expect((await call(`${env().api}/users/alice/accesskeys`, { token: admin })).status).toBe(200);
    const teamKeys = await call(`${env().api}/teams/nobody/accesskeys`, { token: admin });
    expect(teamKeys.json).toMatchObject({ kind: 'TeamAccessKeys', accessKeys: [] });

    const deleted = await call(`${url}/${name}`, { method: 'DELETE', token: alice });
    expect(deleted.status).toBe(200);
    await eventually(
      async () => (await call(`${url}/${name}`, { token: alice })).status === 404,
      20_000,
      'the key deleted',
    );
  });

  test('configs: GET (and the config alias) for admins, POST validates and sets the raw config', async () => {
    const get = await call(`${env().api}/configs/platform`, { token: admin });
    expect(get.status, get.text).toBe(200);
    expect(get.json).toMatchObject({ apiVersion: GROUP_VERSION, kind: 'Config', spec: { raw: '' } });
    expect(get.json.status.projectNamespacePrefix).toBe('p-');
    expect((await call(`${env().api}/config/platform`, { token: admin })).status).toBe(200);
    expect((await call(`${env().api}/configs/platform`, { token: alice })).status).toBe(403);

    const invalidConfig = await call(`${env().api}/configs`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/yaml' },
      body: 'apiVersion: management.platform/v1\nkind: Config\nmetadata:\n  name: config\nspec:\n  raw: |\n    audit:\n      enabled: true\n',
    });
    expect(invalidConfig.status).toBe(422);
    expect(invalidConfig.json.details.causes[0].field).toContain('audit.path');

    // RBAC lets carol set the config (create configs) but not write the Secret it is kept in: the
    // gateway writes as the caller, never as itself, so she is refused and nothing changes.
    const carol = await env().user('carol');
    await env().rbac.createClusterRole({
      body: {
        metadata: { name: 'config-setter' },
        rules: [{ apiGroups: ['management.platform'], resources: ['configs'], verbs: ['get', 'create'] }],
      },
    });
    await env().rbac.createClusterRoleBinding({
      body: {
        metadata: { name: 'config-setter-carol' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'config-setter' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'platform:user:carol' }],
      },
    });
    await eventually(
      async () => (await call(`${env().api}/configs/config`, { token: carol })).status === 200,
      20_000,
      'carol may read the config',
    );
    const asCarol = await call(`${env().api}/configs`, {
      method: 'POST',
      token: carol,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { raw: 'projectNamespacePrefix: carol-\n' } }),
    });
    expect(asCarol.status, asCarol.text).toBe(403);
    expect(asCarol.json.message).toContain('may not write the Secret platform-config');
    expect((await call(`${env().api}/configs/config`, { token: admin })).json.spec.raw).toBe('');

    const raw = 'projectNamespacePrefix: proj-\nauth:\n  accessKeyMaxTTLSeconds: 36000\n';
    const set = await call(`${env().api}/configs`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        apiVersion: GROUP_VERSION,
        kind: 'Config',
        metadata: { name: 'config' },
        spec: { raw },
      }),
    });
    expect(set.status, set.text).toBe(201);
    expect(set.json.status.projectNamespacePrefix).toBe('proj-');
    await eventually(
      async () => (await call(`${env().api}/configs/config`, { token: admin })).json?.spec?.raw === raw,
      20_000,
      'the config stored',
    );
    const read = await call(`${env().api}/configs/config`, { token: admin });
    expect(read.json.status.auth.accessKeyMaxTTLSeconds).toBe(36000);

    await call(`${env().api}/configs`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { raw: 'disableConfigEndpoint: true\n' } }),
    });
    await eventually(
      async () =>
        (await call(`${env().api}/configs/config`, { token: admin })).json?.status?.disableConfigEndpoint ===
        true,
      20_000,
      'the config stored',
    );
    const refused = await call(`${env().api}/configs`, {
      method: 'POST',
      token: admin,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { raw: '' } }),
    });
    expect(refused.status).toBe(403);
    // Put the config endpoint back for the tests after this one.
    const secret = await env().core.readNamespacedSecret({
      name: 'platform-config',
      namespace: 'platform-system',
    });
    await env().core.replaceNamespacedSecret({
      name: 'platform-config',
      namespace: 'platform-system',
      body: { ...secret, data: { config: Buffer.from('').toString('base64') } },
    });
  });

  test('discovery, version, openapi, health; metrics on the health port only', async () => {
    const apis = await call(`${env().base}/apis`, { token: alice });
    expect(apis.json.groups[0].name).toBe('management.platform');
    const resources = await call(`${env().api}`, { token: alice });
    const byName = Object.fromEntries(resources.json.resources.map((r: { name: string }) => [r.name, r]));
    expect(byName.sharedsecrets).toMatchObject({
      namespaced: true,
      kind: 'SharedSecret',
      shortNames: ['ssec'],
    });
    expect(byName.ownedaccesskeys).toMatchObject({ namespaced: false, kind: 'OwnedAccessKey' });
    expect(byName['projects/members']).toMatchObject({ kind: 'ProjectMembers', verbs: ['get'] });
    expect(byName['virtualclusterinstances/kubeconfig']).toMatchObject({
      kind: 'VirtualClusterInstanceKubeConfig',
      verbs: ['create'],
    });
    expect(byName.directclusterendpointtokens).toMatchObject({ namespaced: false, verbs: ['create'] });
    const version = await call(`${env().base}/version`);
    expect(version.status).toBe(200);
    expect(version.json.gitVersion).toMatch(/^v/);
    const v3 = await call(`${env().base}/openapi/v3`, { token: alice });
    const url = v3.json.paths['apis/management.platform/v1'].serverRelativeURL as string;
    expect(url.startsWith('/kubernetes/management/openapi/v3/apis/management.platform/v1?hash=')).toBe(true);
    const doc = await call(`${env().server.url}${url}`, { token: alice });
    expect(Object.keys(doc.json.components.schemas)).toContain('platform.management.v1.SharedSecret');
    expect((await call(`${env().base}/openapi/v2`, { token: alice })).json.swagger).toBe('2.0');
    expect((await call(`${env().server.url}/healthz`)).status).toBe(200);
    expect((await call(`${env().server.url}/readyz`)).status).toBe(200);
    // Metrics are served on the health port with the process's others, not on the API port.
    expect((await call(`${env().server.url}/metrics`)).status).toBe(404);
    expect((await call(`${env().base}/metrics`, { token: alice })).status).toBe(404);
    const metrics = await call(`http://127.0.0.1:${env().manager.healthPort}/metrics`);
    expect(metrics.text).toMatch(
      /gateway_request_total\{verb="LIST",group="management.platform",resource="sharedsecrets",subresource="",scope="namespace",component="gateway",code="200"\} \d+/,
    );
    expect(metrics.text).toContain('gateway_request_duration_seconds_bucket');
  });

  test('repeated failures for one key id: 429 with Retry-After', async () => {
    const victim = await env().key({ user: 'alice' });
    await env().accepted(victim);
    const guess = withChecksum(`${victim.slice(0, 21)}${'1'.repeat(43)}`);
    const codes: number[] = [];
    for (let i = 0; i < 8; i++) codes.push((await call(`${env().base}/apis`, { token: guess })).status);
    expect(codes.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    const limited = await call(`${env().base}/apis`, { token: guess });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.json).toMatchObject({ kind: 'Status', reason: 'TooManyRequests', code: 429 });
  });
});

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** A well-formed key (valid checksum) from its id and secret part: the right shape, the wrong secret. */
function withChecksum(body: string): string {
  let value = BigInt(crc32(body));
  let out = '';
  while (value > 0n) {
    out = BASE62[Number(value % 62n)] + out;
    value /= 62n;
  }
  return body + out.padStart(6, '0');
}
