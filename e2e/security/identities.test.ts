import { describe, expect, test } from 'vitest';
import { COMPONENTS, type Component, NAMESPACE, userOf } from '../chart/support.ts';
import { FINANCE, MALLORY, MP, syncerTokenAsMallory, TEAM, useTenantPlatform } from './support.ts';

/**
 * Issue 15, item 4: "one ServiceAccount does everything". Each component now acts as a
 * ServiceAccount of its own, and each syncer as one of its own in its host namespace. Asked of
 * the real apiserver with the chart's RBAC installed: which of the powers that make a
 * confused deputy a cluster takeover does each identity hold? The answers are exact lists, so a
 * rule added to the chart that grants one of them fails here until this list (and
 * docs/security.md) say why.
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
    ['create pods in kube-system', { verb: 'create', resource: 'pods', namespace: 'kube-system' }],
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

  test('each component holds only the powers its work needs (only the gateway impersonates)', async () => {
    const held = Object.fromEntries(
      await Promise.all(COMPONENTS.map(async (c) => [c, await powersOf(userOf(c), NAMESPACE)] as const)),
    ) as Record<Component, string[]>;
    expect(held).toEqual({
      // The projection may grant anything on SharedSecrets; Secret sync patches labelled Secrets
      // and virtual and connected clusters' credentials are read wherever they are; syncer
      // tokens are minted in instances' namespaces (docs/security.md).
      controller: [
        'patch secrets in kube-system',
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
