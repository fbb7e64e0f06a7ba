import { beforeAll, describe, expect, test } from 'vitest';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { call, GROUP_VERSION, useGatewayEnv } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Hole 9 of issue 16: scopes that could never match. No request carried a space, so
 * `scope.spaces` granted nothing; roles other than `platform-cli` granted nothing either; a key
 * scoped that way got 403 everywhere and admission said nothing. Now a space is a namespace of its
 * project (as the reference product uses the word) and the scope is enforced on namespaced
 * requests; roles without a meaning here are refused at admission; admission warns about parts
 * that can match nothing.
 */
describe('security: every part of a scope means something, or is refused', () => {
  const env = useGatewayEnv();
  const project = uniqueName('web');
  const space = `p-${project}`;
  const elsewhere = uniqueName('other');
  let root: string;
  let inSpace: string;

  beforeAll(async () => {
    for (const namespace of [space, elsewhere]) {
      await env().core.createNamespace({ body: { metadata: { name: namespace } } });
    }
    await env().custom.createClusterCustomObject({
      group: API_GROUP,
      version: API_VERSION,
      plural: 'projects',
      body: {
        apiVersion: GROUP_VERSION,
        kind: 'Project',
        metadata: { name: project },
        spec: { owner: { user: 'x' } },
      },
    });
    // A platform admin: RBAC allows everything, so the scope alone decides.
    const name = uniqueName('root');
    root = await env().user(name, { admin: true });
    inSpace = await env().key({ user: name, scope: { spaces: [{ project, space }] } });
    await env()
      .accepted(inSpace)
      .catch(() => {});
  });

  const list = (namespace: string, token: string) =>
    call(`${env().api}/namespaces/${namespace}/sharedsecrets`, { token });
  const createKey = (scope: unknown) =>
    call(`${env().api}/ownedaccesskeys`, {
      method: 'POST',
      token: root,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ spec: { scope } }),
    });

  test("a key scoped to a project's space reaches that namespace and nothing else", async () => {
    const allowed = await list(space, inSpace);
    expect(allowed.status, allowed.text).toBe(200);
    const refused = await list(elsewhere, inSpace);
    expect(refused.status).toBe(403);
    expect(refused.json.message).toContain("the access key's scope does not allow");
    expect((await list(space, root)).status).toBe(200);
    expect((await call(`${env().api}/ownedaccesskeys`, { token: inSpace })).status).toBe(403);
  });

  test('roles that open nothing here are refused at admission, naming the field', async () => {
    for (const role of ['network-peer', 'runner', 'workspace']) {
      const answer = await createKey({ roles: [{ role }] });
      expect(answer.status, answer.text).toBe(422);
      expect(answer.json.details.causes).toContainEqual(
        expect.objectContaining({ field: 'spec.scope.roles[0].role', reason: 'FieldValueNotSupported' }),
      );
    }
  });

  test('admission warns about parts that can match nothing', async () => {
    const wrongSpace = await createKey({ spaces: [{ project, space: elsewhere }] });
    expect(wrongSpace.status, wrongSpace.text).toBe(201);
    expect(wrongSpace.headers.get('warning')).toContain(
      `${elsewhere} is not a namespace of project ${project}`,
    );
    const agentAlone = await createKey({ roles: [{ role: 'agent' }] });
    expect(agentAlone.status, agentAlone.text).toBe(201);
    expect(agentAlone.headers.get('warning')).toContain('matches nothing');
    const fine = await createKey({ spaces: [{ project, space }] });
    expect(fine.status).toBe(201);
    expect(fine.headers.get('warning')).toBeNull();
  });
});
