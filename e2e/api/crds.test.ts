import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { customResourceDefinition } from '../../src/api/crd.ts';
import { API_GROUP, API_VERSION, GROUP_VERSION } from '../../src/api/meta.ts';
import { STORED_KINDS, type StoredKind } from '../../src/api/registry.ts';
import { storedObjectArbitrary } from '../../test-support/arbitrary.ts';
import { hostKubeConfig, kubectl, uniqueName, useNamespace } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';

type Obj = Record<string, unknown> & { metadata: Record<string, unknown> };

/** CRUD on one stored kind through the custom objects API, in `namespace` when the kind is namespaced. */
function resource(info: StoredKind, namespace: () => string) {
  const api = hostKubeConfig().makeApiClient(CustomObjectsApi);
  const base = { group: API_GROUP, version: API_VERSION, plural: info.plural };
  const scoped = info.scope === 'Namespaced';
  const ns = () => ({ namespace: namespace() });
  return {
    create: (body: Obj) =>
      (scoped
        ? api.createNamespacedCustomObject({ ...base, ...ns(), body })
        : api.createClusterCustomObject({ ...base, body })) as Promise<Obj>,
    get: (name: string) =>
      (scoped
        ? api.getNamespacedCustomObject({ ...base, ...ns(), name })
        : api.getClusterCustomObject({ ...base, name })) as Promise<Obj>,
    replace: (body: Obj) => {
      const name = body.metadata.name as string;
      return (
        scoped
          ? api.replaceNamespacedCustomObject({ ...base, ...ns(), name, body })
          : api.replaceClusterCustomObject({ ...base, name, body })
      ) as Promise<Obj>;
    },
    replaceStatus: (body: Obj) => {
      const name = body.metadata.name as string;
      return (
        scoped
          ? api.replaceNamespacedCustomObjectStatus({ ...base, ...ns(), name, body })
          : api.replaceClusterCustomObjectStatus({ ...base, name, body })
      ) as Promise<Obj>;
    },
    delete: (name: string) =>
      (scoped
        ? api.deleteNamespacedCustomObject({ ...base, ...ns(), name })
        : api.deleteClusterCustomObject({ ...base, name })) as Promise<unknown>,
  };
}

const stored = (kind: string) => STORED_KINDS.find((info) => info.kind === kind) as StoredKind;

/** The apiserver's rejection of `attempt`: its HTTP code and the field paths of its causes. */
async function rejection(
  attempt: Promise<unknown>,
): Promise<{ code: number; fields: string[]; message: string }> {
  try {
    await attempt;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const status = JSON.parse(String(err.body)) as {
      message: string;
      details?: { causes?: { field?: string }[] };
    };
    return {
      code: err.code,
      fields: (status.details?.causes ?? []).map((c) => c.field ?? ''),
      message: status.message,
    };
  }
  throw new Error('the apiserver accepted an invalid object');
}

const object = (kind: string, name: string, spec: unknown): Obj => ({
  apiVersion: GROUP_VERSION,
  kind,
  metadata: { name },
  spec,
});

/** A valid sample of each stored kind, from the spec's examples where it has one. */
const SAMPLES: Record<string, unknown> = {
  SharedSecret: {
    displayName: 'My Global Secret',
    description: 'Secret Data is base64 encoded.',
    owner: { user: 'admin' },
    data: { password: 'cGFzc3dvcmQ=', 'tls.crt': '' },
    access: [{ name: 'readers', verbs: ['get'], subresources: ['*'], users: ['alice'], teams: ['ops'] }],
  },
  OwnedAccessKey: {
    user: 'my-user',
    displayName: 'My Access Key',
    ttl: 1728000,
    type: 'User',
    keyId: 'abc123',
    keyHash: 'a'.repeat(64),
    scope: {
      roles: [{ role: 'vcluster', projects: ['p1'] }],
      projects: [{ project: '*' }],
      spaces: [{ project: 'p1', space: '*' }],
      virtualClusters: [{ project: 'p1', virtualCluster: 'vc' }],
      clusters: [{ cluster: '*' }],
      rules: [
        {
          verbs: ['get'],
          resources: [{ group: '', resources: ['pods'], resourceNames: ['a'] }],
          requestTargets: ['Cluster'],
        },
      ],
      allowPlatformCli: true,
    },
  },
  User: {
    username: 'alice',
    displayName: 'Alice',
    email: 'alice@example.com',
    subject: 'alice',
    clusterRoles: [{ name: 'platform-admin' }],
    disabled: false,
  },
  Team: {
    username: 'ops',
    displayName: 'Ops',
    users: ['alice'],
    groups: ['sso:ops'],
    clusterRoles: [{ name: 'viewer' }],
  },
  Project: {
    displayName: 'Project One',
    description: 'first',
    owner: { team: 'ops' },
    members: [
      { kind: 'User', name: '*', clusterRole: 'platform-project-user' },
      { kind: 'Team', name: 'ops', clusterRole: 'platform-project-admin' },
    ],
  },
  Cluster: {
    displayName: 'Prod',
    endpoint: 'https://10.0.0.1:6443',
    caData: 'Y2E=',
    credentialsSecretRef: { namespace: 'platform', name: 'prod-credentials' },
    directEndpoint: 'https://prod.example.com',
  },
  VirtualClusterInstance: {
    displayName: 'Dev',
    owner: { user: 'alice' },
    clusterRef: { cluster: 'prod', namespace: 'vc-dev', virtualCluster: 'dev' },
    accessPoint: { ingress: { enabled: true } },
    endpoint: 'https://dev.example.com',
    credentialsSecretRef: { name: 'dev-credentials' },
    config: 'sync:\n  toHost:\n    endpoints:\n      enabled: false\n',
  },
  VirtualClusterTemplate: {
    displayName: 'Small',
    description: 'One small control plane',
    kubernetesVersion: 'v1.36.3',
    resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '2', memory: '1Gi' } },
    storage: { size: '5Gi', storageClassName: 'standard' },
    config: 'sync:\n  toHost:\n    endpoints:\n      enabled: false\n',
  },
};

describe('CRDs on a real apiserver', () => {
  const namespace = useNamespace('api-crds');

  beforeAll(async () => {
    await installCrds(hostKubeConfig());
  });

  it.each(STORED_KINDS.map((info) => [info.kind, info] as const))(
    'holds the %s CRD exactly as generated',
    async (_kind, info) => {
      const result = await kubectl(['get', 'crd', `${info.plural}.${API_GROUP}`, '-o', 'json']);
      const served = JSON.parse(result.stdout).spec.versions[0];
      const generated = (customResourceDefinition(info).spec as { versions: Record<string, unknown>[] })
        .versions[0]!;
      expect(served.schema).toEqual(generated.schema);
      expect(served.additionalPrinterColumns).toEqual(generated.additionalPrinterColumns);
      expect(served.selectableFields).toEqual(generated.selectableFields);
    },
  );

  it.each(STORED_KINDS.map((info) => [info.kind, info] as const))(
    'stores a valid %s unchanged',
    async (kind, info) => {
      const api = resource(info, namespace);
      const name = uniqueName(kind.toLowerCase());
      const created = await api.create(object(kind, name, SAMPLES[kind]));
      try {
        expect(created.spec).toEqual(SAMPLES[kind]);
        expect((await api.get(name)).spec).toEqual(SAMPLES[kind]);
        expect(info.schema.parse(created)).toMatchObject({ spec: SAMPLES[kind] });
      } finally {
        await api.delete(name);
      }
    },
  );

  it.each([
    ['a data key with a slash', { data: { 'a/b': 'cGFzc3dvcmQ=' } }, 'spec.data'],
    ['a data key with a space', { data: { 'a b': 'cGFzc3dvcmQ=' } }, 'spec.data'],
    ['a value that is not base64', { data: { password: 'not base64!' } }, 'spec.data.password'],
    ['an access rule without verbs', { access: [{ users: ['a'] }] }, 'spec.access[0].verbs'],
  ])('rejects a SharedSecret with %s at %s', async (_what, spec, field) => {
    const api = resource(stored('SharedSecret'), namespace);
    const result = await rejection(api.create(object('SharedSecret', uniqueName('bad'), spec)));
    expect(result.code).toBe(422);
    expect(result.fields).toContain(field);
  });

  it.each([
    ['an unknown type', { user: 'u', type: 'Robot' }, 'spec.type'],
    [
      'an unknown scope role',
      { user: 'u', scope: { roles: [{ role: 'admin' }] } },
      'spec.scope.roles[0].role',
    ],
    ['a plaintext key', { user: 'u', key: 'plaintext' }, 'spec.key'],
    ['both user and team', { user: 'u', team: 't' }, 'spec.team'],
    ['a malformed key hash', { user: 'u', keyHash: 'xyz' }, 'spec.keyHash'],
    [
      'resourceNames without resources',
      { user: 'u', scope: { rules: [{ resources: [{ resourceNames: ['a'] }] }] } },
      'spec.scope.rules[0].resources[0].resourceNames',
    ],
  ])('rejects an OwnedAccessKey with %s at %s', async (_what, spec, field) => {
    const api = resource(stored('OwnedAccessKey'), namespace);
    const result = await rejection(api.create(object('OwnedAccessKey', uniqueName('bad'), spec)));
    expect(result.code).toBe(422);
    expect(result.fields).toContain(field);
  });

  it.each([
    ['user', { user: 'mallory' }],
    ['user (removed)', { user: undefined }],
    ['type', { type: 'Login' }],
    ['subject', { subject: 'other' }],
    ['keyHash', { keyHash: 'b'.repeat(64) }],
    ['keyId', { keyId: 'other' }],
  ])('refuses to change an access key %s once set', async (field, change) => {
    const api = resource(stored('OwnedAccessKey'), namespace);
    const name = uniqueName('immutable');
    const created = await api.create(
      object('OwnedAccessKey', name, {
        user: 'alice',
        subject: 'alice',
        type: 'User',
        keyHash: 'a'.repeat(64),
        keyId: 'abc',
      }),
    );
    try {
      const spec = { ...(created.spec as Record<string, unknown>), ...change };
      const result = await rejection(api.replace({ ...created, spec: JSON.parse(JSON.stringify(spec)) }));
      expect(result.code).toBe(422);
      expect(result.fields).toContain(`spec.${field.split(' ')[0]}`);
      // Fields without that rule still change.
      const renamed = await api.replace({
        ...created,
        spec: { ...(created.spec as object), displayName: 'renamed' },
      });
      expect((renamed.spec as { displayName: string }).displayName).toBe('renamed');
    } finally {
      await api.delete(name);
    }
  });

  it('kubectl deletes every key of a user at once with --field-selector spec.user=<user> (docs/access-keys-ci.md)', async () => {
    const api = resource(stored('OwnedAccessKey'), namespace);
    const [leaving, staying] = [uniqueName('leaving'), uniqueName('staying')];
    const key = (name: string, user: string) =>
      api.create(object('OwnedAccessKey', name, { user, keyHash: 'a'.repeat(64), keyId: 'abc' }));
    await key(`${leaving}-1`, leaving);
    await key(`${leaving}-2`, leaving);
    await key(`${staying}-1`, staying);
    try {
      const deleted = await kubectl([
        'delete',
        'ownedaccesskeys',
        '--field-selector',
        `spec.user=${leaving}`,
      ]);
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout.trim().split('\n').sort()).toEqual([
        `ownedaccesskey.management.platform "${leaving}-1" deleted`,
        `ownedaccesskey.management.platform "${leaving}-2" deleted`,
      ]);
      expect((await api.get(`${staying}-1`)).spec).toMatchObject({ user: staying });
    } finally {
      await api.delete(`${staying}-1`);
    }
  });

  it('lets a team be set on a key that had none, then keeps it', async () => {
    const api = resource(stored('OwnedAccessKey'), namespace);
    const name = uniqueName('team');
    const created = await api.create(object('OwnedAccessKey', name, { displayName: 'x' }));
    try {
      const withTeam = await api.replace({ ...created, spec: { displayName: 'x', team: 'ops' } });
      expect((withTeam.spec as { team: string }).team).toBe('ops');
      const result = await rejection(api.replace({ ...withTeam, spec: { displayName: 'x', team: 'dev' } }));
      expect(result.fields).toContain('spec.team');
    } finally {
      await api.delete(name);
    }
  });

  it('refuses to move a virtual cluster instance to another host', async () => {
    const api = resource(stored('VirtualClusterInstance'), namespace);
    const name = uniqueName('vci');
    const created = await api.create(object('VirtualClusterInstance', name, SAMPLES.VirtualClusterInstance));
    const spec = created.spec as { clusterRef: object };
    const moved = { ...spec, clusterRef: { ...spec.clusterRef, cluster: 'other' } };
    const result = await rejection(api.replace({ ...created, spec: moved }));
    expect(result.code).toBe(422);
    expect(result.fields).toContain('spec.clusterRef');
    await api.delete(name);
  });

  it.each(STORED_KINDS.map((info) => [info.kind, info] as const))(
    'round-trips generated %s objects without dropping or changing a field',
    async (_kind, info) => {
      const api = resource(info, namespace);
      let counter = 0;
      await fc.assert(
        fc.asyncProperty(storedObjectArbitrary(info, {}), async (generated) => {
          const name = `rt-${info.singular}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 7)}`;
          const body = { ...generated, metadata: { name } } as Obj;
          const created = await api.create(body);
          try {
            expect(created.spec).toEqual(generated.spec);
            if (generated.status !== undefined) {
              const updated = await api.replaceStatus({ ...created, status: generated.status });
              expect(updated.status).toEqual(generated.status);
            }
            const read = await api.get(name);
            expect(read.spec).toEqual(generated.spec);
            expect(read.status).toEqual(generated.status);
          } finally {
            await api.delete(name);
          }
        }),
        { numRuns: 30 },
      );
    },
  );

  it('kubectl explain prints the spec descriptions', async () => {
    // The apiserver publishes a new CRD's OpenAPI shortly after it is established.
    let result = await kubectl(['explain', 'sharedsecrets.spec.access']);
    for (let attempt = 0; attempt < 50 && result.code !== 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      result = await kubectl(['explain', 'sharedsecrets.spec.access']);
    }
    expect(result.stderr).toBe('');
    const text = result.stdout.replace(/\s+/g, ' ');
    expect(text).toContain('GROUP: management.platform');
    expect(text).toContain('Access rights for users and teams, transformed into Roles and RoleBindings.');
    expect(text).toContain('Users that get the verbs on this secret.');
    expect(text).toContain('Teams that get the verbs on this secret.');
    expect(text).toContain('Subresources allowed by the rule.');
    expect(text).toContain('verbs <[]string> -required-');
  });

  it('lists our kinds under the platform category', async () => {
    const result = await kubectl(['get', 'platform', '-A', '-o', 'name']);
    expect(result.code).toBe(0);
    const resources = await kubectl(['api-resources', '--categories', 'platform', '-o', 'name']);
    expect(resources.stdout.trim().split('\n').sort()).toEqual(
      STORED_KINDS.map((k) => `${k.plural}.${API_GROUP}`).sort(),
    );
  });
});
