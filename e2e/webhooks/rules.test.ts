import { createHmac, randomBytes } from 'node:crypto';
import { ApiException, CustomObjectsApi } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { SOURCE_NAME_LABEL, SOURCE_NAMESPACE_LABEL } from '../../src/api/labels.ts';
import { API_GROUP, API_VERSION } from '../../src/api/meta.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { PEPPER_SECRET_KEY, PEPPER_SECRET_NAME } from '../../src/identity/pepper.ts';
import { uniqueName } from '../support/cluster.ts';
import {
  expectCause,
  kubectlOn,
  PLATFORM_NAMESPACE,
  rejectionOf,
  sharedSecretBody,
  useWebhookEnv,
  type WebhookEnv,
} from './support.ts';

const env = useWebhookEnv();
const GV = { group: API_GROUP, version: API_VERSION };
const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

async function namespace(e: WebhookEnv): Promise<string> {
  const name = uniqueName('ns');
  await e.core.createNamespace({ body: { metadata: { name } } });
  return name;
}

function keyBody(name: string, spec: Record<string, unknown>) {
  return { apiVersion: `${API_GROUP}/${API_VERSION}`, kind: 'OwnedAccessKey', metadata: { name }, spec };
}

const createKey = (e: WebhookEnv, body: object, dryRun?: 'All') =>
  e.custom.createClusterCustomObject({
    ...GV,
    plural: 'ownedaccesskeys',
    body,
    ...(dryRun ? { dryRun } : {}),
  }) as Promise<{
    metadata: { name: string };
    spec: Record<string, unknown>;
  }>;

async function setPlatformConfig(e: WebhookEnv, config: string) {
  const body = {
    metadata: { name: 'platform-config', namespace: PLATFORM_NAMESPACE },
    data: { config: b64(config) },
  };
  try {
    await e.core.createNamespacedSecret({ namespace: PLATFORM_NAMESPACE, body });
  } catch (err) {
    if (!(err instanceof ApiException && err.code === 409)) throw err;
    await e.core.replaceNamespacedSecret({ name: 'platform-config', namespace: PLATFORM_NAMESPACE, body });
  }
}

describe('OwnedAccessKey', () => {
  it('dry-run: the key is hashed in the answer, but no pepper Secret is created and nothing is stored', async () => {
    const e = env();
    const { key } = generateAccessKey(randomBytes);
    const name = uniqueName('dry');
    const answer = await createKey(e, keyBody(name, { user: 'alice', key }), 'All');
    expect(answer.spec.key).toBeUndefined();
    expect(answer.spec.keyHash).toMatch(/^[a-f0-9]{64}$/);
    const pepper = await rejectionOf(
      e.core.readNamespacedSecret({ name: PEPPER_SECRET_NAME, namespace: PLATFORM_NAMESPACE }),
    );
    expect(pepper.code).toBe(404);
    const stored = await rejectionOf(
      e.custom.getClusterCustomObject({ ...GV, plural: 'ownedaccesskeys', name }),
    );
    expect(stored.code).toBe(404);
  });

  it('kubectl apply: the last-applied annotation keeps no plaintext key', async () => {
    const e = env();
    const { key, id } = generateAccessKey(randomBytes);
    const name = uniqueName('applied');
    const manifest = JSON.stringify(keyBody(name, { user: 'alice', type: 'User', key }));
    const run = await kubectlOn(e, ['apply', '-f', '-'], manifest);
    expect(run.code, run.stderr).toBe(0);
    const stored = (await e.custom.getClusterCustomObject({ ...GV, plural: 'ownedaccesskeys', name })) as {
      metadata: { annotations?: Record<string, string> };
      spec: Record<string, unknown>;
    };
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(stored.spec.keyId).toBe(id);
    const applied = JSON.parse(
      stored.metadata.annotations?.['kubectl.kubernetes.io/last-applied-configuration'] ?? '{}',
    );
    expect(applied.spec).toEqual({ user: 'alice', type: 'User' });
  });

  it('stores only the keyed hash (HMAC-SHA-256 under the pepper Secret) and the key id', async () => {
    const e = env();
    const { key, id } = generateAccessKey(randomBytes);
    const created = await createKey(e, keyBody(uniqueName('k'), { user: 'alice', key }));
    const pepperSecret = await e.core.readNamespacedSecret({
      name: PEPPER_SECRET_NAME,
      namespace: PLATFORM_NAMESPACE,
    });
    const pepper = Buffer.from(pepperSecret.data![PEPPER_SECRET_KEY]!, 'base64');
    expect(pepper.length).toBeGreaterThanOrEqual(32);
    const stored = (await e.custom.getClusterCustomObject({
      ...GV,
      plural: 'ownedaccesskeys',
      name: created.metadata.name,
    })) as { spec: Record<string, unknown> };
    expect(stored.spec.key).toBeUndefined();
    expect(stored.spec.keyHash).toBe(createHmac('sha256', pepper).update(key).digest('hex'));
    expect(stored.spec.keyId).toBe(id);
    expect(JSON.stringify(stored)).not.toContain(key);
  });

  it('refuses a create without a key, explaining how to get one (client-node and kubectl)', async () => {
    const e = env();
    const refused = await rejectionOf(createKey(e, keyBody(uniqueName('nokey'), { user: 'alice' })));
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expectCause(refused, 'spec.key', /management API/);
    const name = uniqueName('nokey');
    const run = await kubectlOn(e, ['create', '-f', '-'], JSON.stringify(keyBody(name, { user: 'alice' })));
    expect(run.code).not.toBe(0);
    // kubectl renders a 422 from its causes: `The <kind> "<name>" is invalid: <field>: <message>`.
    expect(run.stderr).toContain(
      `The OwnedAccessKey "${name}" is invalid: spec.key: an access key is required: create access keys through the management API`,
    );
  });

  it('refuses a malformed key without echoing it', async () => {
    const e = env();
    const { key } = generateAccessKey(randomBytes);
    const broken = `${key.slice(0, -1)}${key.endsWith('0') ? '1' : '0'}`;
    const refused = await rejectionOf(
      createKey(e, keyBody(uniqueName('bad'), { user: 'alice', key: broken })),
    );
    expect(refused.code).toBe(422);
    expectCause(refused, 'spec.key', /not a platform access key \(checksum\)/);
    expect(refused.message).not.toContain(broken);
  });

  it('refuses a ttl above auth.accessKeyMaxTTLSeconds, naming the maximum, and admits one within it', async () => {
    const e = env();
    await setPlatformConfig(e, 'auth:\n  accessKeyMaxTTLSeconds: 3600\n');
    const over = await rejectionOf(
      createKey(
        e,
        keyBody(uniqueName('ttl'), { user: 'alice', key: generateAccessKey(randomBytes).key, ttl: 7200 }),
      ),
    );
    expect(over.code).toBe(422);
    expect(over.reason).toBe('Invalid');
    expectCause(over, 'spec.ttl', /at most 3600 seconds.*accessKeyMaxTTLSeconds/);
    const run = await kubectlOn(
      e,
      ['create', '-f', '-'],
      JSON.stringify(
        keyBody(uniqueName('ttl'), { user: 'alice', key: generateAccessKey(randomBytes).key, ttl: 7200 }),
      ),
    );
    expect(run.stderr).toMatch(/spec\.ttl: .*3600/);
    const within = await createKey(
      e,
      keyBody(uniqueName('ttl'), { user: 'alice', key: generateAccessKey(randomBytes).key, ttl: 600 }),
    );
    expect(within.spec.ttl).toBe(600);
    await setPlatformConfig(e, '{}\n');
  });

  it('scopes: overlapping wildcard resources are refused by the webhook, unknown roles by the schema', async () => {
    const e = env();
    const overlapping = await rejectionOf(
      createKey(
        e,
        keyBody(uniqueName('scope'), {
          user: 'alice',
          key: generateAccessKey(randomBytes).key,
          scope: { rules: [{ resources: [{ group: '', resources: ['pods/*', 'pods/log'] }] }] },
        }),
      ),
    );
    expect(overlapping.code).toBe(422);
    expectCause(overlapping, 'spec.scope.rules[0].resources[0].resources[1]', /overlaps with `pods\/\*`/);
    const unknownRole = await rejectionOf(
      createKey(
        e,
        keyBody(uniqueName('scope'), {
          user: 'alice',
          key: generateAccessKey(randomBytes).key,
          scope: { roles: [{ role: 'root' }] },
        }),
      ),
    );
    expect(unknownRole.code).toBe(422);
    expectCause(unknownRole, 'spec.scope.roles[0].role', /Unsupported value/);
    const noResources = await rejectionOf(
      createKey(
        e,
        keyBody(uniqueName('scope'), {
          user: 'alice',
          key: generateAccessKey(randomBytes).key,
          scope: { rules: [{ resources: [{ group: '', resourceNames: ['x'] }] }] },
        }),
      ),
    );
    expect(noResources.code).toBe(422);
    expectCause(noResources, 'spec.scope.rules[0].resources[0].resourceNames', /requires `resources`/);
    const badUrl = await rejectionOf(
      createKey(
        e,
        keyBody(uniqueName('scope'), {
          user: 'alice',
          key: generateAccessKey(randomBytes).key,
          scope: { rules: [{ nonResourceURLs: ['/api*'] }] },
        }),
      ),
    );
    expect(badUrl.code).toBe(422);
    expectCause(badUrl, 'spec.scope.rules[0].nonResourceURLs[0]');
  });

  it('scopes: deprecated rules and allowPlatformCli are admitted with warnings kubectl prints', async () => {
    const e = env();
    const body = keyBody(uniqueName('dep'), {
      user: 'alice',
      key: generateAccessKey(randomBytes).key,
      scope: {
        allowPlatformCli: true,
        rules: [{ verbs: ['get'], resources: [{ group: '', resources: ['pods'] }] }],
      },
    });
    const run = await kubectlOn(e, ['create', '-f', '-'], JSON.stringify(body));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('Warning: scope.rules is deprecated');
    expect(run.stderr).toContain('Warning: scope.allowPlatformCli is deprecated');
  });
});

describe('SharedSecret', () => {
  let ns: string;
  beforeAll(async () => {
    ns = await namespace(env());
  });
  const create = (e: WebhookEnv, body: object, api?: CustomObjectsApi) =>
    (api ?? e.custom).createNamespacedCustomObject({ ...GV, plural: 'sharedsecrets', namespace: ns, body });

  it('refuses verbs that are not Kubernetes verbs, with the field path', async () => {
    const e = env();
    const refused = await rejectionOf(
      create(e, sharedSecretBody(uniqueName('s'), [{ verbs: ['get', 'steal'] }])),
    );
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expectCause(refused, 'spec.access[0].verbs[1]', /Unsupported value: "steal"/);
    const name = uniqueName('s');
    const run = await kubectlOn(
      e,
      ['create', '-n', ns, '-f', '-'],
      JSON.stringify(sharedSecretBody(name, [{ verbs: ['steal'] }])),
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(
      `The SharedSecret "${name}" is invalid: spec.access[0].verbs[0]: Unsupported value: "steal"`,
    );
  });

  it('admits Kubernetes verbs and *, warning about users and teams that do not exist', async () => {
    const e = env();
    await e.custom.createClusterCustomObject({
      ...GV,
      plural: 'users',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'User',
        metadata: { name: 'known-user' },
        spec: {},
      },
    });
    const body = sharedSecretBody(uniqueName('s'), [
      { verbs: ['get', 'list', '*'], users: ['known-user', 'ghost-user'], teams: ['ghost-team'] },
    ]);
    const run = await kubectlOn(e, ['create', '-n', ns, '-f', '-'], JSON.stringify(body));
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('Warning: spec.access: user "ghost-user" does not exist');
    expect(run.stderr).toContain('Warning: spec.access: team "ghost-team" does not exist');
    expect(run.stderr).not.toContain('known-user');
  });
});

describe('ownerReferences', () => {
  let ns: string;
  let owner: { metadata: { name: string; uid: string } };
  let alice: { kc: import('@kubernetes/client-node').KubeConfig; path: string; username: string };
  beforeAll(async () => {
    const e = env();
    ns = await namespace(e);
    owner = (await e.custom.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: ns,
      body: sharedSecretBody('owner'),
    })) as typeof owner;
    alice = await e.serviceAccount(ns, 'alice');
    await e.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'writer' },
        rules: [
          {
            apiGroups: [API_GROUP],
            resources: ['sharedsecrets'],
            verbs: ['get', 'list', 'create', 'update', 'patch'],
          },
        ],
      },
    });
    await e.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'alice-writer' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'writer' },
        subjects: [{ kind: 'ServiceAccount', name: 'alice', namespace: ns }],
      },
    });
  });

  const ownedBy = (name: string, ref: Record<string, unknown>) => ({
    ...sharedSecretBody(name),
    metadata: {
      name,
      ownerReferences: [
        {
          apiVersion: `${API_GROUP}/${API_VERSION}`,
          kind: 'SharedSecret',
          name: 'owner',
          uid: owner.metadata.uid,
          ...ref,
        },
      ] as Record<string, unknown>[],
    },
  });

  it('refuses blockOwnerDeletion from a requester who may not delete the owner (422, owner named)', async () => {
    const e = env();
    const api = alice.kc.makeApiClient(CustomObjectsApi);
    const refused = await rejectionOf(
      api.createNamespacedCustomObject({
        ...GV,
        plural: 'sharedsecrets',
        namespace: ns,
        body: ownedBy(uniqueName('dep'), { blockOwnerDeletion: true }),
      }),
    );
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expectCause(
      refused,
      'metadata.ownerReferences[0].blockOwnerDeletion',
      /SharedSecret "owner".*'delete' permission/,
    );
    const name = uniqueName('dep');
    const run = await kubectlOn(
      e,
      ['create', '-n', ns, '-f', '-'],
      JSON.stringify(ownedBy(name, { blockOwnerDeletion: true })),
      alice.path,
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(
      `The SharedSecret "${name}" is invalid: metadata.ownerReferences[0].blockOwnerDeletion: cannot set blockOwnerDeletion on SharedSecret "owner"`,
    );
  });

  it('admits the same reference without blockOwnerDeletion, and refuses flipping it to true later', async () => {
    const api = alice.kc.makeApiClient(CustomObjectsApi);
    const name = uniqueName('dep');
    const created = (await api.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: ns,
      body: ownedBy(name, { blockOwnerDeletion: false }),
    })) as { metadata: { ownerReferences: Record<string, unknown>[] } };
    created.metadata.ownerReferences[0]!.blockOwnerDeletion = true;
    const refused = await rejectionOf(
      api.replaceNamespacedCustomObject({
        ...GV,
        plural: 'sharedsecrets',
        namespace: ns,
        name,
        body: created,
      }),
    );
    expect(refused.code).toBe(422);
    expectCause(refused, 'metadata.ownerReferences[0].blockOwnerDeletion');
  });

  it('admits blockOwnerDeletion once the requester may delete the owner', async () => {
    const e = env();
    await e.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'owner-deleter' },
        rules: [
          {
            apiGroups: [API_GROUP],
            resources: ['sharedsecrets'],
            resourceNames: ['owner'],
            verbs: ['delete'],
          },
        ],
      },
    });
    await e.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'alice-owner-deleter' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'owner-deleter' },
        subjects: [{ kind: 'ServiceAccount', name: 'alice', namespace: ns }],
      },
    });
    const api = alice.kc.makeApiClient(CustomObjectsApi);
    const created = (await api.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: ns,
      body: ownedBy(uniqueName('dep'), { blockOwnerDeletion: true }),
    })) as { metadata: { ownerReferences: { blockOwnerDeletion: boolean }[] } };
    expect(created.metadata.ownerReferences[0]!.blockOwnerDeletion).toBe(true);
  });

  it('refuses two controller references (kube-apiserver enforces it for our kinds: 422)', async () => {
    const e = env();
    const body = ownedBy(uniqueName('dep'), { controller: true });
    body.metadata.ownerReferences.push({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'other',
      uid: '00000000-0000-0000-0000-000000000001',
      controller: true,
    });
    const refused = await rejectionOf(
      e.custom.createNamespacedCustomObject({ ...GV, plural: 'sharedsecrets', namespace: ns, body }),
    );
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expectCause(refused, 'metadata.ownerReferences', /Only one reference can have Controller set to true/);
  });
});

describe('Secret sync authorization', () => {
  let ns: string;
  let bob: { path: string };
  beforeAll(async () => {
    const e = env();
    ns = await namespace(e);
    await e.custom.createNamespacedCustomObject({
      ...GV,
      plural: 'sharedsecrets',
      namespace: ns,
      body: sharedSecretBody('source'),
    });
    bob = await e.serviceAccount(ns, 'bob');
    await e.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'secrets' },
        rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['create', 'update', 'get'] }],
      },
    });
    await e.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'bob-secrets' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'secrets' },
        subjects: [{ kind: 'ServiceAccount', name: 'bob', namespace: ns }],
      },
    });
  });

  const labelled = (name: string) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: ns,
      labels: { [SOURCE_NAME_LABEL]: 'source', [SOURCE_NAMESPACE_LABEL]: ns },
    },
  });

  it('refuses a labelled Secret when the requester may not get the SharedSecret (403)', async () => {
    const e = env();
    const run = await kubectlOn(
      e,
      ['create', '-f', '-'],
      JSON.stringify(labelled(uniqueName('sync'))),
      bob.path,
    );
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(
      /Error from server \(Forbidden\).*may not get sharedsecrets\.management\.platform "source"/,
    );
    const { KubeConfig, CoreV1Api } = await import('@kubernetes/client-node');
    const kc = new KubeConfig();
    kc.loadFromFile(bob.path);
    const refused = await rejectionOf(
      kc
        .makeApiClient(CoreV1Api)
        .createNamespacedSecret({ namespace: ns, body: labelled(uniqueName('sync')) }),
    );
    expect(refused.code).toBe(403);
    expect(refused.reason).toBe('Forbidden');
  });

  it('admits it once the requester may get the SharedSecret; unlabelled Secrets never reach the webhook', async () => {
    const e = env();
    const plain = await kubectlOn(
      e,
      ['create', 'secret', 'generic', uniqueName('plain'), '-n', ns, '--from-literal=a=b'],
      undefined,
      bob.path,
    );
    expect(plain.code, plain.stderr).toBe(0);
    await e.rbac.createNamespacedRole({
      namespace: ns,
      body: {
        metadata: { name: 'source-reader' },
        rules: [
          { apiGroups: [API_GROUP], resources: ['sharedsecrets'], resourceNames: ['source'], verbs: ['get'] },
        ],
      },
    });
    await e.rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: {
        metadata: { name: 'bob-source-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'source-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'bob', namespace: ns }],
      },
    });
    const run = await kubectlOn(
      e,
      ['create', '-f', '-'],
      JSON.stringify(labelled(uniqueName('sync'))),
      bob.path,
    );
    expect(run.code, run.stderr).toBe(0);
  });
});

describe('platform configuration Secret', () => {
  it('refuses an invalid configuration with field paths, admits a valid one', async () => {
    const e = env();
    const invalid = 'audit:\n  enabled: true\nauth:\n  accessKeyMaxTTLSeconds: -5\n';
    const body = {
      metadata: { name: 'platform-config', namespace: PLATFORM_NAMESPACE },
      data: { config: b64(invalid) },
    };
    await e.core
      .deleteNamespacedSecret({ name: 'platform-config', namespace: PLATFORM_NAMESPACE })
      .catch(() => {});
    const refused = await rejectionOf(e.core.createNamespacedSecret({ namespace: PLATFORM_NAMESPACE, body }));
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expect(refused.causes.map((c) => c.field)).toEqual(
      expect.arrayContaining(['data[config].audit.path', 'data[config].auth.accessKeyMaxTTLSeconds']),
    );
    const run = await kubectlOn(e, [
      'create',
      'secret',
      'generic',
      'platform-config',
      '-n',
      PLATFORM_NAMESPACE,
      `--from-literal=config=${invalid}`,
    ]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(
      'admission webhook "platform-config.validate.management.platform" denied the request',
    );
    expect(run.stderr).toContain('data[config].audit.path: required when audit is enabled');
    await setPlatformConfig(e, 'audit:\n  enabled: true\n  path: /var/log/platform\n');
    const elsewhere = await kubectlOn(
      e,
      ['create', 'secret', 'generic', 'platform-config', '-n', 'default', '--from-literal=config=: ['],
      undefined,
    );
    expect(elsewhere.code, elsewhere.stderr).toBe(0);
  });
});

describe('VirtualClusterInstance', () => {
  it('refuses a spec.config the syncer would refuse, naming the patch', async () => {
    const e = env();
    const ns = await namespace(e);
    const config = [
      'sync:',
      '  toHost:',
      '    endpoints:',
      '      patches:',
      '        - path: metadata.labels',
      '          expression: "value"',
      '        - path: metadata.annotations',
      '          expression: "1; evil()"',
    ].join('\n');
    const body = {
      apiVersion: `${API_GROUP}/${API_VERSION}`,
      kind: 'VirtualClusterInstance',
      metadata: { name: 'vc' },
      spec: { endpoint: 'https://vc.example.com', config },
    };
    const refused = await rejectionOf(
      e.custom.createNamespacedCustomObject({
        ...GV,
        plural: 'virtualclusterinstances',
        namespace: ns,
        body,
      }),
    );
    expect(refused.code).toBe(422);
    expect(refused.message).toContain('spec.config: sync.toHost.endpoints.patches[1].expression:');
    expectCause(refused, 'spec.config', /^sync\.toHost\.endpoints\.patches\[1\]\.expression: /);
    const valid = { ...body, spec: { ...body.spec, config: config.split('\n').slice(0, 6).join('\n') } };
    await e.custom.createNamespacedCustomObject({
      ...GV,
      plural: 'virtualclusterinstances',
      namespace: ns,
      body: valid,
    });
  });
});

describe('VirtualClusterInstance: spec.templateRef', () => {
  it('refuses an instance naming a template that does not exist (422, spec.templateRef.name); admits it once the template exists, and edits after the template is deleted', async () => {
    const e = env();
    const ns = await namespace(e);
    const template = uniqueName('vct');
    const body = {
      apiVersion: `${API_GROUP}/${API_VERSION}`,
      kind: 'VirtualClusterInstance',
      metadata: { name: 'vc' },
      spec: { templateRef: { name: template } },
    };
    const create = () =>
      e.custom.createNamespacedCustomObject({
        ...GV,
        plural: 'virtualclusterinstances',
        namespace: ns,
        body,
      });
    const refused = await rejectionOf(create());
    expect(refused.code).toBe(422);
    expect(refused.reason).toBe('Invalid');
    expect(refused.message).toContain(`VirtualClusterTemplate "${template}" does not exist`);
    expectCause(refused, 'spec.templateRef.name', /does not exist/);
    expect(refused.causes.find((c) => c.field === 'spec.templateRef.name')?.reason).toBe(
      'FieldValueNotFound',
    );

    await e.custom.createClusterCustomObject({
      ...GV,
      plural: 'virtualclustertemplates',
      body: {
        apiVersion: `${API_GROUP}/${API_VERSION}`,
        kind: 'VirtualClusterTemplate',
        metadata: { name: template },
        spec: {},
      },
    });
    await create();
    await e.custom.deleteClusterCustomObject({ ...GV, plural: 'virtualclustertemplates', name: template });
    const edited = (await e.custom.patchNamespacedCustomObject({
      ...GV,
      plural: 'virtualclusterinstances',
      namespace: ns,
      name: 'vc',
      body: [{ op: 'add', path: '/metadata/labels', value: { edited: 'after-template-deleted' } }],
    })) as { metadata: { labels?: Record<string, string> } };
    expect(edited.metadata.labels?.edited).toBe('after-template-deleted');
  });
});

describe('VirtualClusterTemplate', () => {
  it('refuses a default spec.config the syncer would refuse, naming the patch', async () => {
    const e = env();
    const config = (expression: string) =>
      [
        'sync:',
        '  toHost:',
        '    endpoints:',
        '      patches:',
        '        - path: metadata.labels',
        `          expression: "${expression}"`,
      ].join('\n');
    const body = (name: string, expression: string) => ({
      apiVersion: `${API_GROUP}/${API_VERSION}`,
      kind: 'VirtualClusterTemplate',
      metadata: { name },
      spec: { config: config(expression) },
    });
    const name = uniqueName('vct');
    const refused = await rejectionOf(
      e.custom.createClusterCustomObject({
        ...GV,
        plural: 'virtualclustertemplates',
        body: body(name, '1; evil()'),
      }),
    );
    expect(refused.code).toBe(422);
    expectCause(refused, 'spec.config', /^sync\.toHost\.endpoints\.patches\[0\]\.expression: /);
    await e.custom.createClusterCustomObject({
      ...GV,
      plural: 'virtualclustertemplates',
      body: body(name, 'value'),
    });
    await e.custom.deleteClusterCustomObject({ ...GV, plural: 'virtualclustertemplates', name });
  });
});
