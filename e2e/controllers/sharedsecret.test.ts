import { request } from 'node:https';
import {
  CoreV1Api,
  CustomObjectsApi,
  EventsV1Api,
  type KubeConfig,
  type KubernetesObject,
  RbacAuthorizationV1Api,
} from '@kubernetes/client-node';
import { beforeAll, describe, expect, test } from 'vitest';
import { OWNER_UID_LABEL } from '../../src/api/labels.ts';
import { resources } from '../../src/api/resources.ts';
import type { SharedSecret } from '../../src/api/sharedsecret.ts';
import { desiredRbac } from '../../src/controllers/sharedsecret/desired.ts';
import { hostKubeConfig, useNamespace } from '../support/cluster.ts';
import { installCrds } from '../support/crds.ts';
import { useOperator } from '../support/operator.ts';
import { eventually } from '../support/wait.ts';

const GROUP = 'management.platform';
const VERSION = 'v1';
const PLURAL = 'sharedsecrets';

function clients(kc: KubeConfig) {
  return {
    custom: kc.makeApiClient(CustomObjectsApi),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    core: kc.makeApiClient(CoreV1Api),
  };
}

function sharedSecret(name: string, spec: SharedSecret['spec']) {
  return { apiVersion: `${GROUP}/${VERSION}`, kind: 'SharedSecret', metadata: { name }, spec };
}

async function readSharedSecret(custom: CustomObjectsApi, namespace: string, name: string) {
  return (await custom.getNamespacedCustomObject({
    group: GROUP,
    version: VERSION,
    namespace,
    plural: PLURAL,
    name,
  })) as SharedSecret;
}

/** The projected objects reduced to what the spec decides, for exact comparison. */
function essence(rbac: {
  roles: { metadata?: { name?: string }; rules?: unknown }[];
  roleBindings: { metadata?: { name?: string }; subjects?: unknown; roleRef?: unknown }[];
}) {
  return {
    roles: rbac.roles
      .map((r) => ({ name: r.metadata?.name, rules: r.rules }))
      .sort((a, b) => String(a.name).localeCompare(String(b.name))),
    roleBindings: rbac.roleBindings
      .map((b) => ({ name: b.metadata?.name, subjects: b.subjects ?? [], roleRef: b.roleRef }))
      .sort((a, b) => String(a.name).localeCompare(String(b.name))),
  };
}

describe('SharedSecret access projected into Roles and RoleBindings', () => {
  const namespace = useNamespace('ss-projection');
  const kc = hostKubeConfig();
  const { custom, rbac } = clients(kc);
  beforeAll(() => installCrds(kc));
  useOperator(namespace);

  const read = (name: string) => readSharedSecret(custom, namespace(), name);
  const projected = async (uid: string) => {
    const labelSelector = `${OWNER_UID_LABEL}=${uid}`;
    const [roles, roleBindings] = await Promise.all([
      rbac.listNamespacedRole({ namespace: namespace(), labelSelector }),
      rbac.listNamespacedRoleBinding({ namespace: namespace(), labelSelector }),
    ]);
    return essence({ roles: roles.items, roleBindings: roleBindings.items });
  };
  /** Waits until the cluster holds exactly what the spec asks for, and the status says so. */
  const converged = async (name: string) => {
    let last = '';
    await eventually(
      async () => {
        const secret = await read(name);
        const actual = await projected(secret.metadata.uid!);
        const expected = essence(desiredRbac(secret));
        const ready = secret.status?.conditions?.find((c) => c.type === 'Ready');
        last = JSON.stringify({ actual, expected, ready });
        return (
          sameAs(actual, expected) &&
          ready?.status === 'True' &&
          ready.observedGeneration === secret.metadata.generation
        );
      },
      60_000,
      `projection of ${name}`,
    ).catch((err: Error) => {
      throw new Error(`${err.message}; last seen: ${last}`);
    });
    return read(name);
  };

  test('create, change, remove rules, delete: the Roles and RoleBindings always match the spec', async () => {
    const ns = namespace();
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      body: sharedSecret('db', {
        data: { password: 'aHVudGVyMg==', user: 'YWRtaW4=' },
        access: [
          { name: 'readers', verbs: ['get'], users: ['alice'] },
          { name: 'ops', verbs: ['get', 'update'], teams: ['ops'], subresources: ['status'] },
        ],
      }),
    });
    let secret = await converged('db');
    // No finalizer: deleting a secret never waits for the operator.
    expect(secret.metadata.finalizers ?? []).toEqual([]);
    expect(secret.status?.observedGeneration).toBe(secret.metadata.generation);
    expect(secret.status?.dataKeys).toEqual(['password', 'user']);
    expect((await projected(secret.metadata.uid!)).roles).toHaveLength(2);

    // A changed rule is updated in place (same names).
    const namesBefore = (await projected(secret.metadata.uid!)).roles.map((r) => r.name);
    await custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'db',
      body: [{ op: 'replace', path: '/spec/access/0/users', value: ['alice', 'bob'] }],
    });
    secret = await converged('db');
    expect((await projected(secret.metadata.uid!)).roles.map((r) => r.name)).toEqual(namesBefore);

    // A removed rule's Role and RoleBinding are deleted.
    await custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'db',
      body: [{ op: 'remove', path: '/spec/access/1' }],
    });
    secret = await converged('db');
    expect((await projected(secret.metadata.uid!)).roleBindings).toHaveLength(1);

    // Deletion: the secret goes at once; its Roles and RoleBindings follow (owner references).
    const uid = secret.metadata.uid!;
    await custom.deleteNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      name: 'db',
    });
    await eventually(
      async () => {
        const { roles, roleBindings } = await projected(uid);
        const gone = await read('db').then(
          () => false,
          () => true,
        );
        return gone && roles.length === 0 && roleBindings.length === 0;
      },
      60_000,
      'deletion of db and its Roles',
    );
  });

  test('stale children are removed and hand edits are reverted', async () => {
    const ns = namespace();
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: ns,
      plural: PLURAL,
      body: sharedSecret('tampered', { access: [{ name: 'r', verbs: ['get'], users: ['alice'] }] }),
    });
    const secret = await converged('tampered');
    const [role] = desiredRbac(secret).roles;
    const [roleBinding] = desiredRbac(secret).roleBindings;
    // Left over from an earlier spec: labelled and controlled by the secret, but no rule asks for them.
    const stale = { ...role!.metadata!, name: 'stale-role', resourceVersion: undefined };
    await rbac.createNamespacedRole({ namespace: ns, body: { ...role!, metadata: stale } });
    await rbac.createNamespacedRoleBinding({
      namespace: ns,
      body: { ...roleBinding!, metadata: { ...stale, name: 'stale-binding' } },
    });
    await rbac.patchNamespacedRole({
      namespace: ns,
      name: role!.metadata!.name!,
      body: [{ op: 'replace', path: '/rules/0/verbs', value: ['*'] }],
    });
    // converged: the projection (every Role and RoleBinding labelled with the secret's uid) is
    // exactly what the spec asks for, so the stale pair is gone and the edited verbs are back.
    await converged('tampered');
  });

  describe('authorization follows the projected RBAC', () => {
    const ssName = 'api-token';
    beforeAll(async () => {
      await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: namespace(),
        plural: PLURAL,
        body: sharedSecret(ssName, {
          data: { token: 'dG9rZW4=' },
          access: [
            { name: 'alice', verbs: ['get'], users: ['alice'] },
            { name: 'ops', verbs: ['get', 'update'], teams: ['ops'] },
            { name: 'everyone', verbs: ['watch'], users: ['*'] },
            { name: 'status', verbs: ['get'], users: ['carol'], subresources: ['status'] },
            { name: 'admins', verbs: ['*'], teams: ['admins'] },
          ],
        }),
      });
      await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: namespace(),
        plural: PLURAL,
        body: sharedSecret('other', { data: { x: 'eA==' } }),
      });
      await converged(ssName);
      await converged('other');
    });

    /** A real request as an impersonated user: RBAC decides, as it will for the gateway. */
    const as = (user: string, groups: string[], method: string, name: string, sub = '') =>
      impersonatedStatus(
        kc,
        user,
        groups,
        method,
        `/apis/${GROUP}/${VERSION}/namespaces/${namespace()}/${PLURAL}/${name}${sub}`,
      );

    test.each([
      ['alice gets her secret', 'alice', ['platform:user:alice'], 'GET', ssName, '', 200],
      ['alice cannot get another secret', 'alice', ['platform:user:alice'], 'GET', 'other', '', 403],
      ['alice cannot delete (verb not given)', 'alice', ['platform:user:alice'], 'DELETE', ssName, '', 403],
      ['bob, not named anywhere, cannot get it', 'bob', ['platform:user:bob'], 'GET', ssName, '', 403],
      [
        'a member of team ops gets it',
        'dave',
        ['platform:user:dave', 'platform:team:ops'],
        'GET',
        ssName,
        '',
        200,
      ],
      [
        'a member of team ops cannot delete it',
        'dave',
        ['platform:user:dave', 'platform:team:ops'],
        'DELETE',
        ssName,
        '',
        403,
      ],
      ['carol gets the status subresource', 'carol', ['platform:user:carol'], 'GET', ssName, '/status', 200],
      // A rule always covers the secret itself; `subresources` adds to it.
      ['carol gets the secret itself too', 'carol', ['platform:user:carol'], 'GET', ssName, '', 200],
      [
        'carol cannot update the status subresource',
        'carol',
        ['platform:user:carol'],
        'PUT',
        ssName,
        '/status',
        403,
      ],
      [
        'alice cannot get the status subresource',
        'alice',
        ['platform:user:alice'],
        'GET',
        ssName,
        '/status',
        403,
      ],
      ['a team admins member may delete (*)', 'erin', ['platform:team:admins'], 'GET', ssName, '', 200],
    ])('%s', async (_, user, groups, method, name, sub, expected) => {
      expect(await as(user, groups, method, name, sub)).toBe(expected);
    });

    test('`*` users: any authenticated platform identity may watch the secret, not get it', async () => {
      const path = `/apis/${GROUP}/${VERSION}/namespaces/${namespace()}/${PLURAL}?watch=true&fieldSelector=metadata.name%3D${ssName}&timeoutSeconds=1`;
      expect(await impersonatedStatus(kc, 'zoe', ['platform:authenticated'], 'GET', path)).toBe(200);
      expect(await as('zoe', ['platform:authenticated'], 'GET', ssName)).toBe(403);
    });
  });
});

describe('SharedSecret reconciles follow spec changes, not status writes', () => {
  const namespace = useNamespace('ss-quiet');
  const kc = hostKubeConfig();
  const { custom } = clients(kc);
  beforeAll(() => installCrds(kc));
  // An operator of its own, running this controller alone: its metrics count this block's reconciles only.
  const manager = useOperator(namespace, { controllers: ['sharedsecret'] });

  const metric = async (name: string, labels: Record<string, string>) =>
    ((await manager().registry.getSingleMetric(name)?.get())?.values ?? [])
      .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
      .reduce((sum, v) => sum + v.value, 0);
  const reconciles = () => metric('controller_runtime_reconcile_total', { controller: 'sharedsecret' });
  /**
   * The reconciles counted once the operator's cache holds `resourceVersion` of the secret (its
   * informer enqueues as it stores, so the event of that write has been handled) and the queue is
   * empty with no reconcile running: every reconcile that write could cause has been counted.
   */
  const reconcilesAfter = async (name: string, resourceVersion: string | undefined) => {
    const informer = manager().informer<SharedSecret & KubernetesObject>(resources.sharedSecrets, {
      namespace: namespace(),
    });
    await eventually(
      async () =>
        informer.store.get(`${namespace()}/${name}`)?.metadata?.resourceVersion === resourceVersion &&
        (await metric('workqueue_depth', { name: 'sharedsecret' })) === 0 &&
        (await metric('controller_runtime_active_workers', { controller: 'sharedsecret' })) === 0,
      30_000,
      `the operator to handle resourceVersion ${resourceVersion} of ${name}`,
    );
    return reconciles();
  };
  const read = (name: string) => readSharedSecret(custom, namespace(), name);

  /** The secret once its status describes its generation. */
  const statusOfGeneration = async (name: string) => {
    let secret: SharedSecret | undefined;
    await eventually(
      async () => {
        secret = await read(name);
        return secret.status?.observedGeneration === secret.metadata.generation;
      },
      60_000,
      `the status of ${name} for its generation`,
    );
    return secret!;
  };

  test("neither its own status write nor another writer's condition causes a reconcile; a spec change does", async () => {
    // No access rules: no Roles or RoleBindings whose events would wake the secret too.
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: namespace(),
      plural: PLURAL,
      body: sharedSecret('quiet', { data: { user: 'YWRtaW4=' } }),
    });
    let secret = await statusOfGeneration('quiet');
    // One reconcile: the one that wrote the status, whose update event reconciled nothing more.
    expect(await reconcilesAfter('quiet', secret.metadata.resourceVersion)).toBe(1);

    // Another writer's condition through the status subresource: a new resourceVersion, the same generation.
    const conditions = [
      ...(secret.status?.conditions ?? []),
      {
        type: 'Audited',
        status: 'True',
        reason: 'Checked',
        message: 'by another controller',
        lastTransitionTime: new Date().toISOString(),
      },
    ];
    const audited = (await custom.patchNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: namespace(),
      plural: PLURAL,
      name: 'quiet',
      body: [{ op: 'replace', path: '/status/conditions', value: conditions }],
    })) as SharedSecret;
    expect(audited.metadata.generation).toBe(secret.metadata.generation);
    expect(await reconcilesAfter('quiet', audited.metadata.resourceVersion)).toBe(1);

    // A spec change is reconciled: its status write says so.
    await custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: namespace(),
      plural: PLURAL,
      name: 'quiet',
      body: [{ op: 'add', path: '/spec/data/password', value: 'aHVudGVyMg==' }],
    });
    secret = await statusOfGeneration('quiet');
    expect(secret.status?.dataKeys).toEqual(['password', 'user']);
    expect(secret.status?.conditions?.map((c) => c.type)).toContain('Audited');
    expect(await reconcilesAfter('quiet', secret.metadata.resourceVersion)).toBe(2);
  });
});

describe('Secrets filled from a SharedSecret', () => {
  const namespace = useNamespace('ss-sync');
  const kc = hostKubeConfig();
  const { custom, core } = clients(kc);
  beforeAll(async () => {
    await installCrds(kc);
    await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: namespace(),
      plural: PLURAL,
      body: sharedSecret('source', { data: { user: 'YWRtaW4=', password: 'aHVudGVyMg==' } }),
    });
  });
  useOperator(namespace);

  const secretData = async (name: string) =>
    (await core.readNamespacedSecret({ namespace: namespace(), name })).data ?? {};
  const labels = () => ({
    'management.platform/sharedsecret-name': 'source',
    'management.platform/sharedsecret-namespace': namespace(),
  });

  test('filled with all keys, updated when the SharedSecret changes', async () => {
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: { metadata: { name: 'all', labels: labels() } },
    });
    await eventually(
      async () => Object.keys(await secretData('all')).length === 2,
      60_000,
      'the Secret to be filled',
    );
    expect(await secretData('all')).toEqual({ user: 'YWRtaW4=', password: 'aHVudGVyMg==' });

    await custom.patchNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: namespace(),
      plural: PLURAL,
      name: 'source',
      body: [{ op: 'replace', path: '/spec/data/password', value: 'bmV3LXBhc3N3b3Jk' }],
    });
    await eventually(
      async () => (await secretData('all')).password === 'bmV3LXBhc3N3b3Jk',
      60_000,
      'the update to propagate',
    );
  });

  test('only the keys the annotation lists', async () => {
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: {
        metadata: {
          name: 'subset',
          labels: labels(),
          annotations: { 'management.platform/sharedsecret-keys': 'user' },
        },
      },
    });
    await eventually(
      async () => (await secretData('subset')).user === 'YWRtaW4=',
      60_000,
      'the subset to be filled',
    );
    expect(Object.keys(await secretData('subset'))).toEqual(['user']);
  });

  test('a SharedSecret that does not exist: the data is left as it is, and a Warning Event says so', async () => {
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: {
        metadata: {
          name: 'orphan',
          labels: { ...labels(), 'management.platform/sharedsecret-name': 'no-such-source' },
        },
        data: { kept: 'eA==' },
      },
    });
    const events = kc.makeApiClient(EventsV1Api);
    await eventually(
      async () =>
        (await events.listNamespacedEvent({ namespace: namespace() })).items.some(
          (e) => e.reason === 'SharedSecretNotFound' && e.regarding?.name === 'orphan',
        ),
      60_000,
      'the SharedSecretNotFound Event',
    );
    expect(await secretData('orphan')).toEqual({ kept: 'eA==' });
  });

  test('keys no longer selected are removed; keys someone else wrote stay', async () => {
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: {
        metadata: {
          name: 'narrowed',
          labels: labels(),
          annotations: { 'management.platform/sharedsecret-keys': 'user,password' },
        },
        data: { theirs: 'eA==' },
      },
    });
    await eventually(
      async () => Object.keys(await secretData('narrowed')).length === 3,
      60_000,
      'both selected keys copied',
    );
    await core.patchNamespacedSecret({
      namespace: namespace(),
      name: 'narrowed',
      body: [
        {
          op: 'replace',
          path: '/metadata/annotations/management.platform~1sharedsecret-keys',
          value: 'user',
        },
      ],
    });
    await eventually(
      async () => !('password' in (await secretData('narrowed'))),
      60_000,
      'the key no longer selected to be removed',
    );
    expect(await secretData('narrowed')).toEqual({ theirs: 'eA==', user: 'YWRtaW4=' });
  });

  test('a Secret without the labels is never touched', async () => {
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: { metadata: { name: 'plain' }, data: { mine: 'eA==' } },
    });
    // Give the controller every chance: a labelled Secret created after it is filled first.
    await core.createNamespacedSecret({
      namespace: namespace(),
      body: { metadata: { name: 'marker', labels: labels() } },
    });
    await eventually(
      async () => Object.keys(await secretData('marker')).length === 2,
      60_000,
      'the marker to be filled',
    );
    const plain = await core.readNamespacedSecret({ namespace: namespace(), name: 'plain' });
    expect(plain.data).toEqual({ mine: 'eA==' });
    expect(plain.metadata?.managedFields?.map((m) => m.manager)).not.toContain('platform-secret-sync');
  });
});

/** `toEqual` semantics (key order and undefined properties do not matter) as a boolean. */
function sameAs(actual: unknown, expected: unknown): boolean {
  try {
    expect(actual).toEqual(expected);
    return true;
  } catch {
    return false;
  }
}

/** HTTP status of a request made as cluster admin impersonating `user` with `groups`. */
function impersonatedStatus(
  kc: KubeConfig,
  user: string,
  groups: string[],
  method: string,
  path: string,
): Promise<number> {
  const cluster = kc.getCurrentCluster()!;
  const token = kc.getCurrentUser()!.token!;
  const url = new URL(path, cluster.server);
  const ca = Buffer.from(cluster.caData!, 'base64').toString();
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca,
        headers: {
          authorization: `Bearer ${token}`,
          'impersonate-user': user,
          'impersonate-group': groups,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end();
  });
}
