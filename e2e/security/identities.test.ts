// biome-ignore-all lint/suspicious/noExplicitAny: the tests read loosely typed objects

import { describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION } from '../../src/api/labels.ts';
import { stateSecret } from '../../src/login/oidc-provider/secret-models.ts';
import type { Http } from '../chart/rbac-support.ts';
import { COMPONENTS, type Component, NAMESPACE, provisionerOptionsOf, userOf } from '../chart/support.ts';
import { renderChart } from '../support/helm.ts';
import { eventually } from '../support/wait.ts';
import { b64, FINANCE, MALLORY, MP, syncerTokenAsMallory, TEAM, useTenantPlatform } from './support.ts';

/**
 * Issue 15, item 4: "one ServiceAccount does everything". Each component now acts as a
 * ServiceAccount of its own, and each syncer as one of its own in its host namespace. Asked of
 * the real apiserver with the chart installed: which of the powers that make a confused deputy a
 * cluster takeover does each identity hold? First what RBAC grants (exact lists, so a rule added
 * to the chart that grants one of them fails here until this list and docs/security.md say why);
 * then every write among them RBAC cannot narrow, made for real as the component and refused by
 * the chart's confinement policies (templates/confinement.yaml), beside the writes its work needs,
 * which go through.
 */
describe('no identity of the platform can take the cluster over', () => {
  const env = useTenantPlatform();

  /** The powers asked about: `[what, SubjectAccessReview resource attributes]`. */
  const POWERS: Array<[string, Record<string, string>]> = [
    ['impersonate users', { verb: 'impersonate', resource: 'users', name: 'someone' }],
    ['impersonate groups', { verb: 'impersonate', resource: 'groups', name: 'system:masters' }],
    [
      'impersonate service accounts',
      { verb: 'impersonate', resource: 'serviceaccounts', namespace: 'kube-system' },
    ],
    [
      'bind cluster-admin',
      { verb: 'bind', group: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'cluster-admin' },
    ],
    [
      'escalate roles',
      { verb: 'escalate', group: 'rbac.authorization.k8s.io', resource: 'roles', namespace: 'kube-system' },
    ],
    [
      'create cluster role bindings',
      { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' },
    ],
    [
      'create role bindings in kube-system',
      {
        verb: 'create',
        group: 'rbac.authorization.k8s.io',
        resource: 'rolebindings',
        namespace: 'kube-system',
      },
    ],
    [
      'bind the syncer Secret role',
      {
        verb: 'bind',
        group: 'rbac.authorization.k8s.io',
        resource: 'clusterroles',
        name: 'platform-vcluster-syncer-secrets',
      },
    ],
    ['create pods in kube-system', { verb: 'create', resource: 'pods', namespace: 'kube-system' }],
    [
      'create statefulsets in kube-system',
      { verb: 'create', group: 'apps', resource: 'statefulsets', namespace: 'kube-system' },
    ],
    ['exec into pods', { verb: 'create', resource: 'pods', subresource: 'exec', namespace: TEAM }],
    ['create secrets in kube-system', { verb: 'create', resource: 'secrets', namespace: 'kube-system' }],
    ['update secrets in kube-system', { verb: 'update', resource: 'secrets', namespace: 'kube-system' }],
    ['patch secrets in kube-system', { verb: 'patch', resource: 'secrets', namespace: 'kube-system' }],
    ['delete secrets in kube-system', { verb: 'delete', resource: 'secrets', namespace: 'kube-system' }],
    ['read secrets in kube-system', { verb: 'get', resource: 'secrets', namespace: 'kube-system' }],
    ['list secrets in kube-system', { verb: 'list', resource: 'secrets', namespace: 'kube-system' }],
    [
      'mint tokens in kube-system',
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: 'kube-system' },
    ],
    [
      'write webhook configurations',
      { verb: 'create', group: 'admissionregistration.k8s.io', resource: 'validatingwebhookconfigurations' },
    ],
    [
      'read SharedSecrets',
      { verb: 'get', group: 'management.platform', resource: 'sharedsecrets', namespace: FINANCE },
    ],
  ];

  const allowed = async (user: string, groups: string[], attributes: Record<string, string>) =>
    (
      await env().admin.create('/apis/authorization.k8s.io/v1/subjectaccessreviews', {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user, groups, resourceAttributes: attributes },
      })
    ).status.allowed === true;
  const powersOf = async (user: string, namespace: string) => {
    const groups = ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'];
    const held: string[] = [];
    for (const [what, attributes] of POWERS) if (await allowed(user, groups, attributes)) held.push(what);
    return held;
  };

  test('what RBAC grants each component: only the powers its work needs, only the gateway impersonates', async () => {
    const held = Object.fromEntries(
      await Promise.all(COMPONENTS.map(async (c) => [c, await powersOf(userOf(c), NAMESPACE)] as const)),
    ) as Record<Component, string[]>;
    expect(held).toEqual({
      // The projection may grant anything on SharedSecrets; Secret sync watches and patches
      // labelled Secrets and virtual and connected clusters' credentials are read wherever they
      // are; projected and syncer RoleBindings are made where SharedSecrets and instances are,
      // the syncer roles bound to syncers; syncer tokens are minted in instances' namespaces.
      // RBAC cannot narrow these by label, namespace label or name prefix: the writes are
      // confined by admission (next test), the reads remain (docs/security.md, "What remains").
      // The in-cluster provisioner (the chart's default) makes StatefulSets and Secrets where
      // instances are and deletes them with the instance: confined by admission as well. It so
      // holds every permission of the syncer Secret role, which RBAC therefore lets it bind
      // without `bind` (not granted): whom it binds it to is confined all the same (next test).
      controller: [
        'create role bindings in kube-system',
        'create statefulsets in kube-system',
        'create secrets in kube-system',
        'patch secrets in kube-system',
        'delete secrets in kube-system',
        'read secrets in kube-system',
        'list secrets in kube-system',
        'mint tokens in kube-system',
        'read SharedSecrets',
      ],
      // Its configurations and, in the platform namespace only, its Secrets.
      webhook: [],
      // It calls the apiserver as each access key's user; it reads a virtual cluster's
      // credentials for the kubeconfig endpoint, wherever the instance is.
      gateway: ['impersonate users', 'impersonate groups', 'read secrets in kube-system'],
    });
  });

  /** Makes a request as `who`: its status and the message of the answer. */
  const attempt = async (
    who: Http,
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
  ): Promise<{ status: number; message: string }> => {
    const answer = await who.call(method, path, {
      ...(body === undefined ? {} : { body }),
      ...(contentType ? { contentType } : {}),
    });
    return { status: answer.status, message: String(answer.body?.message ?? '') };
  };
  const refusedBy = (policy: string) => ({
    status: 403,
    message: expect.stringContaining(`ValidatingAdmissionPolicy '${policy}'`),
  });
  const MERGE = 'application/merge-patch+json';
  const DRY = '?dryRun=All';
  const binding = (name: string, roleRef: Record<string, string>, subjects: unknown[]) => ({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', ...roleRef },
    subjects,
  });
  const controllerSubject = { kind: 'ServiceAccount', name: 'platform-controller', namespace: NAMESPACE };
  const rbacPath = (namespace: string, plural: string) =>
    `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/${plural}`;

  test("the controller's writes RBAC cannot narrow are confined by admission: none reaches kube-system, another namespace or another identity", async () => {
    const { admin, components, instance } = env();
    const controller = components.controller;
    const policy = 'platform-controller-confinement';
    // What an attacker would be after in kube-system, and a namespace of nobody's project.
    await admin.create('/api/v1/namespaces/kube-system/serviceaccounts', {
      metadata: { name: 'vcluster-syncer-decoy' },
    });
    await admin.create('/api/v1/namespaces/kube-system/secrets', {
      metadata: { name: 'cluster-creds' },
      data: { token: b64('kube-system-token') },
    });
    await admin.create(
      rbacPath('kube-system', 'rolebindings'),
      binding('kube-system-reader', { kind: 'ClusterRole', name: 'view' }, [
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'ops' },
      ]),
    );
    await admin.create('/api/v1/namespaces', { metadata: { name: 'ops' } });
    // The policy is in force (the apiserver loads policies asynchronously): a dry run it refuses.
    await eventually(
      async () =>
        (
          await attempt(
            controller,
            'PATCH',
            `/api/v1/namespaces/kube-system/secrets/cluster-creds${DRY}`,
            { data: { token: b64('x') } },
            MERGE,
          )
        ).status === 403,
      60_000,
      'the confinement policy to be in force',
    );

    const dev = await admin.get(
      `/apis/management.platform/v1/namespaces/${TEAM}/virtualclusterinstances/dev`,
    );
    const instanceOwner = {
      apiVersion: 'management.platform/v1',
      kind: 'VirtualClusterInstance',
      name: 'dev',
      uid: dev.metadata.uid,
    };
    // The image the chart's controller runs (and provisions with).
    const platformImage = provisionerOptionsOf(await renderChart()).provisionerImage ?? '';
    const statefulSet = (image: string) => ({
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'vc-grab', ownerReferences: [instanceOwner] },
      spec: {
        serviceName: 'grab',
        selector: { matchLabels: { app: 'grab' } },
        template: {
          metadata: { labels: { app: 'grab' } },
          spec: { containers: [{ name: 'c', image }] },
        },
      },
    });
    // StatefulSets to scale (sleep mode scales an instance's to zero): one in kube-system, one in
    // a project namespace.
    for (const namespace of ['kube-system', TEAM])
      await admin.create(`/apis/apps/v1/namespaces/${namespace}/statefulsets`, {
        ...statefulSet(platformImage),
        metadata: { name: 'vc-scaled' },
      });
    const scale = (namespace: string, replicas: number) =>
      attempt(
        controller,
        'PATCH',
        `/apis/apps/v1/namespaces/${namespace}/statefulsets/vc-scaled/scale${DRY}`,
        { spec: { replicas } },
        MERGE,
      );
    const refused: Array<[string, Promise<{ status: number; message: string }>]> = [
      // Tokens: of kube-system's ServiceAccounts (named like a syncer's or not), of a project
      // namespace's ServiceAccount that is not a syncer's.
      ...['default', 'vcluster-syncer-decoy'].map(
        (sa) =>
          [
            `mint a token of kube-system/${sa}`,
            attempt(controller, 'POST', `/api/v1/namespaces/kube-system/serviceaccounts/${sa}/token`, {
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenRequest',
              spec: {},
            }),
          ] as [string, Promise<{ status: number; message: string }>],
      ),
      [
        `mint a token of ${TEAM}/default`,
        attempt(controller, 'POST', `/api/v1/namespaces/${TEAM}/serviceaccounts/default/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: {},
        }),
      ],
      // Secrets: kube-system's, a tenant's own (not labelled for Secret sync).
      [
        'patch a Secret in kube-system',
        attempt(
          controller,
          'PATCH',
          `/api/v1/namespaces/kube-system/secrets/cluster-creds${DRY}`,
          { data: { token: b64('x') } },
          MERGE,
        ),
      ],
      [
        `patch an unlabelled Secret in ${TEAM}`,
        attempt(
          controller,
          'PATCH',
          `/api/v1/namespaces/${TEAM}/secrets/vc-creds${DRY}`,
          { data: { token: b64('x') } },
          MERGE,
        ),
      ],
      // The in-cluster provisioner's kinds: nothing in kube-system, nothing in a project
      // namespace that is not an instance's, and no StatefulSet but of the platform's image.
      [
        'create an admin-named Secret in kube-system',
        attempt(controller, 'POST', `/api/v1/namespaces/kube-system/secrets${DRY}`, {
          metadata: { name: 'vc-x-admin', ownerReferences: [instanceOwner] },
        }),
      ],
      [
        'delete a Secret in kube-system',
        attempt(controller, 'DELETE', `/api/v1/namespaces/kube-system/secrets/cluster-creds${DRY}`),
      ],
      [
        'create a StatefulSet in kube-system',
        attempt(
          controller,
          'POST',
          `/apis/apps/v1/namespaces/kube-system/statefulsets${DRY}`,
          statefulSet(platformImage),
        ),
      ],
      [
        `create a StatefulSet of another image in ${TEAM}, owned by an instance`,
        attempt(
          controller,
          'POST',
          `/apis/apps/v1/namespaces/${TEAM}/statefulsets${DRY}`,
          statefulSet('evil:latest'),
        ),
      ],
      [
        `create a Service in ${TEAM} owned by no instance`,
        attempt(controller, 'POST', `/api/v1/namespaces/${TEAM}/services${DRY}`, {
          metadata: { name: 'grab' },
          spec: { ports: [{ port: 443 }] },
        }),
      ],
      // Scales: nothing outside project namespaces, nothing up.
      ['scale a StatefulSet in kube-system to zero', scale('kube-system', 0)],
      [`scale a StatefulSet in ${TEAM} up`, scale(TEAM, 3)],
      // Bindings: the syncer and project roles in kube-system (Secrets, Pods there), a syncer
      // role in a project namespace to the controller itself.
      [
        'bind the syncer Secret role in kube-system to itself',
        attempt(
          controller,
          'POST',
          `${rbacPath('kube-system', 'rolebindings')}${DRY}`,
          binding('grab', { kind: 'ClusterRole', name: 'platform-vcluster-syncer-secrets' }, [
            controllerSubject,
          ]),
        ),
      ],
      [
        'bind the project admin role in kube-system',
        attempt(
          controller,
          'POST',
          `${rbacPath('kube-system', 'rolebindings')}${DRY}`,
          binding('grab', { kind: 'ClusterRole', name: 'platform-project-admin' }, [
            { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `platform:user:${MALLORY}` },
          ]),
        ),
      ],
      [
        `bind the syncer Secret role in ${TEAM} to itself`,
        attempt(
          controller,
          'POST',
          `${rbacPath(TEAM, 'rolebindings')}${DRY}`,
          binding('grab', { kind: 'ClusterRole', name: 'platform-vcluster-syncer-secrets' }, [
            controllerSubject,
          ]),
        ),
      ],
      [
        'make a Role on Secrets in kube-system',
        attempt(controller, 'POST', `${rbacPath('kube-system', 'roles')}${DRY}`, {
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'Role',
          metadata: { name: 'grab' },
          rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }],
        }),
      ],
      [
        'delete a RoleBinding in kube-system',
        attempt(controller, 'DELETE', `${rbacPath('kube-system', 'rolebindings')}/kube-system-reader${DRY}`),
      ],
      // Identities and namespaces: a syncer-named ServiceAccount in kube-system, kube-system
      // made a project's namespace, a namespace of nobody's project deleted.
      [
        'make a syncer ServiceAccount in kube-system',
        attempt(controller, 'POST', `/api/v1/namespaces/kube-system/serviceaccounts${DRY}`, {
          metadata: { name: 'vcluster-syncer-grab' },
        }),
      ],
      [
        "label kube-system as team's namespace",
        attempt(
          controller,
          'PATCH',
          `/api/v1/namespaces/kube-system${DRY}`,
          { metadata: { labels: { 'management.platform/project': 'team' } } },
          MERGE,
        ),
      ],
      [
        `delete the platform namespace`,
        attempt(controller, 'DELETE', `/api/v1/namespaces/${NAMESPACE}${DRY}`),
      ],
      ['delete the ops namespace', attempt(controller, 'DELETE', `/api/v1/namespaces/ops${DRY}`)],
      // Quotas: none outside project namespaces, none but the project quota.
      ...(['kube-system', 'ops'] as const).map(
        (ns) =>
          [
            `create a ResourceQuota in ${ns}`,
            attempt(controller, 'POST', `/api/v1/namespaces/${ns}/resourcequotas${DRY}`, {
              metadata: { name: 'platform-project-quota' },
              spec: { hard: { pods: '0' } },
            }),
          ] as [string, Promise<{ status: number; message: string }>],
      ),
      [
        `create another ResourceQuota in ${TEAM}`,
        attempt(controller, 'POST', `/api/v1/namespaces/${TEAM}/resourcequotas${DRY}`, {
          metadata: { name: 'starve' },
          spec: { hard: { pods: '0' } },
        }),
      ],
    ];
    for (const [what, answer] of refused) expect(await answer, what).toEqual(refusedBy(policy));

    // What its work needs goes through: a syncer's token, a labelled Secret filled (even in a
    // namespace of nobody's project: a cluster admin labelled it).
    // An instance's StatefulSet scaled to zero (an instance put to sleep).
    expect((await scale(TEAM, 0)).status).toBe(200);
    // An instance's StatefulSet of the platform's image (what the in-cluster provisioner writes).
    expect(
      (
        await attempt(
          controller,
          'POST',
          `/apis/apps/v1/namespaces/${TEAM}/statefulsets${DRY}`,
          statefulSet(platformImage),
        )
      ).status,
    ).toBe(201);
    expect(
      (
        await attempt(
          controller,
          'POST',
          `/api/v1/namespaces/${TEAM}/serviceaccounts/${instance.serviceAccount}/token`,
          { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
        )
      ).status,
    ).toBe(201);
    expect(
      (
        await attempt(controller, 'POST', `/api/v1/namespaces/${TEAM}/resourcequotas${DRY}`, {
          metadata: { name: 'platform-project-quota' },
          spec: { hard: { 'count/virtualclusterinstances.management.platform': '1' } },
        })
      ).status,
      'the project quota',
    ).toBe(201);
    await admin.create('/api/v1/namespaces/ops/secrets', {
      metadata: {
        name: 'db',
        labels: {
          'management.platform/sharedsecret-name': 'prod-db',
          'management.platform/sharedsecret-namespace': FINANCE,
        },
      },
    });
    await eventually(
      async () => (await admin.get('/api/v1/namespaces/ops/secrets/db'))?.data?.password !== undefined,
      60_000,
      'Secret sync to fill the labelled Secret',
    );
    // Not even that Secret's labels or type may it change.
    expect(
      await attempt(
        controller,
        'PATCH',
        `/api/v1/namespaces/ops/secrets/db${DRY}`,
        { metadata: { labels: { 'management.platform/sharedsecret-name': 'other' } } },
        MERGE,
      ),
    ).toEqual(refusedBy(policy));
    // Nothing of the attempts stayed.
    expect(await admin.get('/api/v1/namespaces/kube-system/secrets/cluster-creds')).toMatchObject({
      data: { token: b64('kube-system-token') },
    });
    expect((await admin.get('/api/v1/namespaces/kube-system'))?.metadata?.labels).not.toHaveProperty(
      'management.platform/project',
    );
  });

  test('a syncer gets an identity only in a project namespace: an instance a cluster admin made elsewhere does not sync, and says why', async () => {
    const { admin, virtualCluster } = env();
    await admin.create('/api/v1/namespaces', { metadata: { name: 'outside' } });
    await admin.create('/api/v1/namespaces/outside/secrets', {
      metadata: { name: 'creds' },
      data: { token: b64(virtualCluster.adminToken) },
    });
    await admin.create(`${MP}/namespaces/outside/virtualclusterinstances`, {
      apiVersion: 'management.platform/v1',
      kind: 'VirtualClusterInstance',
      metadata: { name: 'stray' },
      spec: {
        endpoint: virtualCluster.server,
        caData: b64(virtualCluster.caPem),
        credentialsSecretRef: { name: 'creds' },
        config: 'sync:\n  toHost:\n    secrets:\n      enabled: true\n',
      },
    });
    let syncing: any;
    await eventually(
      async () => {
        syncing = (
          (await admin.get(`${MP}/namespaces/outside/virtualclusterinstances/stray`))?.status?.conditions ??
          []
        ).find((c: any) => c.type === 'Syncing');
        return syncing?.reason === 'SyncerIdentityFailed';
      },
      60_000,
      "the instance's Syncing condition",
    ).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify(syncing)}`);
    });
    expect(syncing).toMatchObject({ status: 'False' });
    expect(syncing.message).toContain('outside');
    expect(await admin.list('/api/v1/namespaces/outside/serviceaccounts')).not.toContainEqual(
      expect.objectContaining({
        metadata: expect.objectContaining({ name: expect.stringMatching(/^vcluster-syncer-/) }),
      }),
    );
  });

  test('a Cluster names only credentials its writer may read (the controller reads them wherever they are)', async () => {
    const { admin, mallory } = env();
    // Mallory is trusted with connected clusters (a cluster admin gave her Clusters), not with
    // kube-system's Secrets: the controller, which reads any Secret, would read the one she
    // names and present its token to the endpoint she names.
    await admin.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name: 'cluster-writer' },
      rules: [
        { apiGroups: ['management.platform'], resources: ['clusters'], verbs: ['create', 'update', 'get'] },
      ],
    });
    await admin.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: 'cluster-writer-mallory' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-writer' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `platform:user:${MALLORY}` }],
    });
    await admin.create('/api/v1/namespaces/kube-system/secrets', {
      metadata: { name: 'remote-creds' },
      data: { token: b64('kube-system-remote-token') },
    });
    const cluster = (name: string, namespace: string, secret: string) => ({
      apiVersion: 'management.platform/v1',
      kind: 'Cluster',
      metadata: { name },
      spec: { endpoint: 'https://127.0.0.1:1', credentialsSecretRef: { namespace, name: secret } },
    });
    await eventually(
      async () => (await mallory.call('GET', `${MP}/clusters/none`)).status === 404,
      60_000,
      'mallory to be allowed Clusters',
    );
    const policy = 'platform-credentials-references';
    const refused = {
      status: 403,
      message: expect.stringContaining(
        `ValidatingAdmissionPolicy '${policy}' with binding '${policy}' denied request: spec.credentialsSecretRef: the requester may not get Secret kube-system/remote-creds`,
      ),
    };
    expect(
      await attempt(mallory, 'POST', `${MP}/clusters`, cluster('stolen', 'kube-system', 'remote-creds')),
    ).toEqual(refused);
    // Credentials of her own namespace (she may read them) are fine, and can then not be
    // pointed elsewhere.
    expect((await attempt(mallory, 'POST', `${MP}/clusters`, cluster('mine', TEAM, 'vc-creds'))).status).toBe(
      201,
    );
    // Read, change, write, as a client does: again on a conflict (the cluster controller writes
    // the new Cluster meanwhile: its finalizer, its status), which says nothing of admission.
    const repoint = async () => {
      const mine = await mallory.ok('GET', `${MP}/clusters/mine`);
      return attempt(mallory, 'PUT', `${MP}/clusters/mine`, {
        ...mine,
        spec: { ...mine.spec, credentialsSecretRef: { namespace: 'kube-system', name: 'remote-creds' } },
      });
    };
    let repointed = await repoint();
    for (let conflicts = 1; repointed.status === 409 && conflicts < 10; conflicts++)
      repointed = await repoint();
    expect(repointed).toEqual(refused);
    expect(await admin.get(`${MP}/clusters/stolen`)).toBeNull();
  });

  test("the gateway's Secret writes in the platform namespace are held to its own Secrets", async () => {
    const { admin, components } = env();
    const gateway = components.gateway;
    const policy = 'platform-gateway-confinement';
    const secrets = `/api/v1/namespaces/${NAMESPACE}/secrets`;
    const replace = async (name: string) => {
      const current = await admin.get(`${secrets}/${name}`);
      return attempt(gateway, 'PUT', `${secrets}/${name}${DRY}`, {
        ...current,
        data: { ...current.data, planted: b64('x') },
      });
    };
    await eventually(
      async () => (await replace('platform-config')).status === 403,
      60_000,
      'the confinement policy to be in force',
    );
    // RBAC lets it replace any Secret there (password Secrets' names are not known ahead).
    expect(await replace('platform-config'), 'replace the configuration').toEqual(refusedBy(policy));
    expect(await replace('platform-webhook-serving'), "replace the webhook's certificate").toEqual(
      refusedBy(policy),
    );
    expect(
      await attempt(gateway, 'POST', `${secrets}${DRY}`, { metadata: { name: 'planted' }, data: {} }),
      'create a Secret of another name',
    ).toEqual(refusedBy(policy));
    // A password Secret, as the sign-in code writes it, goes through.
    const password = {
      metadata: { name: 'platform-password-someone' },
      type: 'management.platform/password',
      data: { hash: b64('x') },
    };
    expect((await attempt(gateway, 'POST', `${secrets}${DRY}`, password)).status).toBe(201);
    expect(
      await attempt(gateway, 'POST', `${secrets}${DRY}`, { ...password, type: 'Opaque' }),
      'a password Secret of another type',
    ).toEqual(refusedBy(policy));
    // The OpenID provider's state, as secret-models.ts writes it, goes through; deleting another
    // Secret (the gateway deletes expired state) does not.
    const state = stateSecret({
      model: 'Session',
      id: 'some-session',
      namespace: NAMESPACE,
      payload: {},
      expiresAt: Date.now() + 60_000,
    });
    expect((await attempt(gateway, 'POST', `${secrets}${DRY}`, state)).status).toBe(201);
    expect(
      await attempt(gateway, 'POST', `${secrets}${DRY}`, { ...state, type: 'Opaque' }),
      'an OpenID provider state Secret of another type',
    ).toEqual(refusedBy(policy));
    expect(
      await attempt(gateway, 'DELETE', `${secrets}/platform-config${DRY}`),
      'delete the configuration',
    ).toEqual(refusedBy(policy));
  });

  test("the gateway's writes of VirtualClusterInstances (sleep mode's activity) are held to their last-activity annotation", async () => {
    const { components } = env();
    const gateway = components.gateway;
    const policy = 'platform-gateway-activity';
    const instance = `${MP}/namespaces/${TEAM}/virtualclusterinstances/dev${DRY}`;
    const patch = (body: unknown) => attempt(gateway, 'PATCH', instance, body, MERGE);
    const repoint = { spec: { endpoint: 'https://attacker.example:6443' } };
    await eventually(
      async () => (await patch(repoint)).status === 403,
      60_000,
      'the confinement policy to be in force',
    );
    // RBAC lets it patch any instance (to record activity and wake): never more than that.
    expect(await patch(repoint), "repoint an instance's endpoint").toEqual(refusedBy(policy));
    expect(
      await patch({ spec: { credentialsSecretRef: { name: 'another-secret' } } }),
      'name other credentials',
    ).toEqual(refusedBy(policy));
    expect(await patch({ metadata: { labels: { planted: 'x' } } }), 'label an instance').toEqual(
      refusedBy(policy),
    );
    expect(await patch({ metadata: { annotations: { planted: 'x' } } }), 'another annotation').toEqual(
      refusedBy(policy),
    );
    expect(
      await patch({ metadata: { finalizers: ['planted.example/finalizer'] } }),
      'a finalizer that would keep it',
    ).toEqual(refusedBy(policy));
    // What the access proxy writes goes through.
    const activity = { metadata: { annotations: { [LAST_ACTIVITY_ANNOTATION]: new Date().toISOString() } } };
    expect((await patch(activity)).status).toBe(200);
  });

  test("a syncer's identity, which its tenant can mint tokens for, holds none of them, and nothing outside its namespace", async () => {
    const user = `system:serviceaccount:${TEAM}:${env().instance.serviceAccount}`;
    expect(await powersOf(user, TEAM)).toEqual([]);
    const groups = ['system:serviceaccounts', `system:serviceaccounts:${TEAM}`, 'system:authenticated'];
    for (const [verb, resource, namespace, expected] of [
      ['create', 'secrets', TEAM, true],
      ['list', 'services', TEAM, true],
      ['create', 'secrets', FINANCE, false],
      ['list', 'services', 'default', false],
      ['create', 'pods', TEAM, false],
      ['create', 'rolebindings', TEAM, false],
      ['get', 'serviceaccounts', TEAM, false],
    ] as const)
      expect(
        await allowed(user, groups, {
          verb,
          resource,
          namespace,
          ...(resource === 'rolebindings' ? { group: 'rbac.authorization.k8s.io' } : {}),
        }),
        `${verb} ${resource} in ${namespace}`,
      ).toBe(expected);
    // What mallory can do with its token is no more than what she can do herself.
    const asSyncer = await syncerTokenAsMallory(env());
    try {
      expect((await asSyncer.call('GET', `${MP}/namespaces/${FINANCE}/sharedsecrets/prod-db`)).status).toBe(
        403,
      );
      expect((await asSyncer.call('GET', '/api/v1/namespaces/kube-system/secrets')).status).toBe(403);
    } finally {
      asSyncer.close();
    }
  });

  test("a project member cannot act as the platform's components (no tokens, no impersonation)", async () => {
    for (const component of COMPONENTS) {
      const token = await env().mallory.call(
        'POST',
        `/api/v1/namespaces/${NAMESPACE}/serviceaccounts/platform-${component}/token`,
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} } },
      );
      expect(token.status, component).toBe(403);
      const groups = [`platform:user:${MALLORY}`, 'platform:authenticated'];
      for (const attributes of [
        {
          verb: 'impersonate',
          resource: 'serviceaccounts',
          namespace: NAMESPACE,
          name: `platform-${component}`,
        },
        { verb: 'impersonate', resource: 'users', name: userOf(component) },
      ] as Array<Record<string, string>>)
        expect(await allowed(MALLORY, groups, attributes), `${component}: ${attributes.resource}`).toBe(
          false,
        );
    }
  });
});
