// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed answers
import { beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Rows of docs/spec-coverage.md that kube-apiserver or the gateway carry out and no other test
 * showed, each as a client of the management API sees it (through the gateway, against a real
 * kube-apiserver with the platform's CRDs and admission): the `kind` and `namespace` of an object
 * cannot be updated (rows 2, 8), annotations are kept across modifications (row 17), team and
 * subject keys act as their team and subject (row 43), and platform admins, users and teams alike,
 * are left out of a project's members (row 61).
 */
describe('spec rows through the gateway', () => {
  const env = useGatewayEnv();
  const namespace = uniqueName('rows');
  const other = uniqueName('rows-other');
  let admin: string;

  beforeAll(async () => {
    for (const name of [namespace, other]) await env().core.createNamespace({ body: { metadata: { name } } });
    admin = await env().user('root', { admin: true });
  });

  const secrets = (ns = namespace) => `${env().api}/namespaces/${ns}/sharedsecrets`;
  const send = (url: string, method: string, body: unknown, contentType = 'application/json') =>
    call(url, {
      method,
      token: admin,
      headers: { 'Content-Type': contentType },
      body: JSON.stringify(body),
    });
  const createSecret = async (name: string, metadata: Record<string, unknown> = {}) => {
    const created = await send(secrets(), 'POST', {
      apiVersion: GROUP_VERSION,
      kind: 'SharedSecret',
      metadata: { name, ...metadata },
      spec: { data: { password: 'cGFzc3dvcmQ=' } },
    });
    expect(created.status, created.text).toBe(201);
    return created.json;
  };
  /**
   * PUT of the object as read just before, changed by `change`: the SharedSecret controller writes
   * the status meanwhile, so a 409 (stale resourceVersion) means read again and retry.
   */
  const putFresh = async (url: string, change: (current: any) => any) => {
    let answer: Awaited<ReturnType<typeof call>> | undefined;
    await eventually(
      async () => {
        const current = (await call(url, { token: admin })).json;
        answer = await send(url, 'PUT', change(current));
        return answer.status !== 409;
      },
      30_000,
      `a PUT of ${url} on its latest resourceVersion`,
    );
    return answer as Awaited<ReturnType<typeof call>>;
  };

  test('row 2: kind is the endpoint’s and cannot be updated, by PUT or by JSON patch', async () => {
    await createSecret('kind-fixed');
    const put = await putFresh(`${secrets()}/kind-fixed`, (current) => ({
      ...current,
      kind: 'OwnedAccessKey',
    }));
    expect(put.status, put.text).toBe(422);
    expect(put.json.details.causes).toEqual([
      expect.objectContaining({
        field: 'kind',
        message: 'Invalid value: "OwnedAccessKey": must be SharedSecret',
      }),
    ]);
    const patched = await send(
      `${secrets()}/kind-fixed`,
      'PATCH',
      [{ op: 'replace', path: '/kind', value: 'OwnedAccessKey' }],
      'application/json-patch+json',
    );
    expect(patched.status, patched.text).toBe(422);
    expect(patched.json.details.causes).toEqual([expect.objectContaining({ field: 'kind' })]);
    // A body without kind is taken as the endpoint's kind.
    const inferred = await send(secrets(), 'POST', {
      apiVersion: GROUP_VERSION,
      metadata: { name: 'kind-inferred' },
      spec: {},
    });
    expect(inferred.status, inferred.text).toBe(201);
    expect(inferred.json.kind).toBe('SharedSecret');
    const read = await call(`${secrets()}/kind-fixed`, { token: admin });
    expect(read.json).toMatchObject({ kind: 'SharedSecret', apiVersion: GROUP_VERSION });
  });

  test('row 8: namespace is a DNS label, defaults to the path’s, and cannot be updated', async () => {
    const created = await createSecret('ns-fixed');
    expect(created.metadata.namespace).toBe(namespace);
    const moved = await putFresh(`${secrets()}/ns-fixed`, (current) => ({
      ...current,
      metadata: { ...current.metadata, namespace: other },
    }));
    const mismatch = 'the namespace of the provided object does not match the namespace sent on the request';
    expect(moved.status, moved.text).toBe(400);
    expect(moved.json.message).toBe(mismatch);
    const patched = await send(
      `${secrets()}/ns-fixed`,
      'PATCH',
      [{ op: 'replace', path: '/metadata/namespace', value: other }],
      'application/json-patch+json',
    );
    expect(patched.status, patched.text).toBe(400);
    expect(patched.json.message).toBe(mismatch);
    expect((await call(`${secrets(other)}/ns-fixed`, { token: admin })).status).toBe(404);
    expect((await call(`${secrets()}/ns-fixed`, { token: admin })).json.metadata.namespace).toBe(namespace);
    // A namespace that is not a DNS label names nothing.
    for (const invalid of ['Not_A_Label', 'a.b']) {
      const answer = await call(secrets(invalid), { token: admin });
      expect(answer.status, invalid).toBe(400);
      expect(answer.json.message).toBe(`invalid namespace "${invalid}": must be a DNS-1123 label`);
    }
  });

  test('row 17: annotations are kept across a patch, an update of other fields and the controller’s status writes', async () => {
    const annotations = {
      'example.com/owner': 'payments',
      'note.example.com/text': 'free text: with spaces, "quotes" and\nnew lines',
    };
    await createSecret('annotated', { annotations });
    const patched = await send(
      `${secrets()}/annotated`,
      'PATCH',
      [{ op: 'add', path: '/spec/data/user', value: 'YWRtaW4=' }],
      'application/json-patch+json',
    );
    expect(patched.status, patched.text).toBe(200);
    expect(patched.json.metadata.annotations).toEqual(annotations);
    const put = await putFresh(`${secrets()}/annotated`, (current) => ({
      ...current,
      spec: { ...current.spec, displayName: 'Renamed' },
    }));
    expect(put.status, put.text).toBe(200);
    // The SharedSecret controller writes the status; the annotations stay as they were.
    let settled: any;
    await eventually(
      async () => {
        settled = (await call(`${secrets()}/annotated`, { token: admin })).json;
        return settled.spec.displayName === 'Renamed' && (settled.status?.conditions ?? []).length > 0;
      },
      30_000,
      'the controller to write the status',
    );
    expect(settled.metadata.annotations).toEqual(annotations);
  });

  test('row 43: a team key acts as its team and a subject key as its subject, with their groups', async () => {
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'teams',
      body: { apiVersion: GROUP_VERSION, kind: 'Team', metadata: { name: 'ops' }, spec: {} },
    });
    const teamKey = await env().key({ team: 'ops' });
    const subjectKey = await env().key({ subject: 'network-peer-1', type: 'Other', groups: ['peers'] });
    const userKey = await env().user(uniqueName('bystander'), { teams: ['ops'] });
    for (const key of [teamKey, subjectKey]) await env().accepted(key);
    // RBAC names each identity: the team's user in `namespace`, the subject's user in `other`,
    // its group in a third namespace.
    const third = uniqueName('rows-group');
    await env().core.createNamespace({ body: { metadata: { name: third } } });
    const bind = async (ns: string, kind: 'User' | 'Group', name: string) => {
      await env().rbac.createNamespacedRole({
        namespace: ns,
        body: {
          metadata: { name: 'read-shared-secrets' },
          rules: [{ apiGroups: [API_GROUP], resources: ['sharedsecrets'], verbs: ['list'] }],
        },
      });
      await env().rbac.createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: 'read-shared-secrets' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-shared-secrets' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind, name }],
        },
      });
    };
    await bind(namespace, 'User', 'platform:team:ops');
    await bind(other, 'User', 'network-peer-1');
    await bind(third, 'Group', 'peers');
    const lists = async (key: string, ns: string) => (await call(secrets(ns), { token: key })).status;
    const granted: Array<[string, string, string]> = [
      ['the team', teamKey, namespace],
      ['the subject', subjectKey, other],
      ["the subject's group", subjectKey, third],
    ];
    for (const [what, key, ns] of granted)
      await eventually(async () => (await lists(key, ns)) === 200, 30_000, `RBAC for ${what}`);
    // The team key is the team, not a user of it: the team's binding opens `namespace` only.
    expect(await lists(teamKey, other)).toBe(403);
    expect(await lists(teamKey, third)).toBe(403);
    // A user of the team is not the team's user either.
    expect(await lists(userKey, namespace)).toBe(403);
    expect(await lists(subjectKey, namespace)).toBe(403);
  });

  test('row 61: platform admins are not members: an admin user, a user of an admin team, an admin team', async () => {
    const teams = [
      { name: 'board', clusterRoles: [{ name: 'platform-admin' }], users: ['chair'] },
      { name: 'devs', users: ['dana'] },
    ];
    for (const { name, ...spec } of teams)
      await env().custom.createClusterCustomObject({
        group: API_GROUP,
        version: API_VERSION,
        plural: 'teams',
        body: { apiVersion: GROUP_VERSION, kind: 'Team', metadata: { name }, spec },
      });
    await env().user('chair', { teams: ['board'] });
    await env().user('dana', { teams: ['devs'] });
    await env().user('erin');
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: 'members-without-admins' },
        spec: {
          owner: { user: 'root' },
          members: [
            { kind: 'User', name: 'chair', clusterRole: 'viewer' },
            { kind: 'User', name: 'erin', clusterRole: 'viewer' },
            { kind: 'Team', name: 'board', clusterRole: 'viewer' },
            { kind: 'Team', name: 'devs', clusterRole: 'viewer' },
          ],
        },
      },
    });
    const answer = await call(`${env().api}/projects/members-without-admins/members`, { token: admin });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json.users.map((user: any) => user.info.name)).toEqual(['dana', 'erin']);
    expect(answer.json.teams.map((team: any) => team.info.name)).toEqual(['devs']);
  });
});
