import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { rawRequest } from '../support/access-proxy.ts';
import { kubectl } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { INSTANCE, PENDING, useProvisionedEnv, WEB } from './provisioned-env.ts';

/**
 * The access proxy reaches a virtual cluster the platform provisioned (no `spec.endpoint`) with
 * the admin credential its provisioner wrote (`vc-<name>-admin`), impersonating the caller, so
 * the virtual cluster's own RBAC decides; one not provisioned yet is a 503 that says so.
 */
describe('access proxy: provisioned virtual clusters', () => {
  const env = useProvisionedEnv();
  const viaProxy = (token: string, project: string, instance: string, path: string, init = {}) =>
    rawRequest(`${env().proxyUrl(project, instance)}${path}`, env().gateway.dispatcher, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    });

  test("a project member's key reaches it with kubectl, as themselves", async () => {
    const { alice } = env().keys;
    await env().grantNamespaceList('alice');
    const file = join(env().gateway.cluster!.kubeconfigPath, '..', 'alice-provisioned.kubeconfig');
    writeFileSync(
      file,
      kubeConfigYaml({
        name: 'provisioned',
        server: env().proxyUrl(WEB, INSTANCE),
        caPem: env().gateway.caPem!,
        credentials: { token: alice },
      }),
      { mode: 0o600 },
    );
    // The binding may take a moment to reach the virtual apiserver's RBAC cache.
    let listed = { code: -1, stdout: '' };
    await eventually(
      async () => {
        listed = await kubectl(['get', 'namespaces', '-o', 'name'], { kubeconfig: file });
        return listed.code === 0;
      },
      30_000,
      'alice to list namespaces',
    );
    expect(listed.stdout).toContain('namespace/kube-system');
    const review = await viaProxy(alice, WEB, INSTANCE, '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      method: 'POST',
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    });
    expect(review.status).toBe(201);
    expect(review.json.status.userInfo.username).toBe('alice');
    expect(review.json.status.userInfo.groups).toContain('platform:user:alice');
  });

  test("the member's RBAC in the virtual cluster decides", async () => {
    const { carol } = env().keys;
    const refused = await viaProxy(carol, WEB, INSTANCE, '/api/v1/namespaces');
    expect(refused.status).toBe(403);
    expect(refused.json.message).toContain('User "carol" cannot list resource "namespaces"');
    await env().grantNamespaceList('carol');
    await eventually(
      async () => (await viaProxy(carol, WEB, INSTANCE, '/api/v1/namespaces')).status === 200,
      30_000,
      'carol to list namespaces once granted there',
    );
  });

  test("another project's member is refused: the platform reaches it as them, and nobody granted them there", async () => {
    // bob owns project shop, not web; his key is valid and unscoped. The platform forwards (the
    // virtual cluster's RBAC decides, ADR 0026) but as bob, never as the admin credential it holds.
    const { bob } = env().keys;
    const refused = await viaProxy(bob, WEB, INSTANCE, '/api/v1/namespaces');
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ kind: 'Status', code: 403 });
    expect(refused.json.message).toContain('User "bob" cannot list resource "namespaces"');
    expect(refused.body.toString()).not.toContain('kube-system');
  });

  test('an instance not provisioned yet answers 503, saying so, without a credential', async () => {
    const { alice } = env().keys;
    const answer = await viaProxy(alice, WEB, PENDING, '/api/v1/namespaces');
    expect(answer.status).toBe(503);
    expect(answer.json).toMatchObject({ kind: 'Status', code: 503 });
    expect(answer.json.message).toBe(
      `virtual cluster "${WEB}/${PENDING}" cannot be reached (NotProvisioned): the platform has not made its control plane yet (it has no admin credentials yet)`,
    );
    expect(answer.headers.get('retry-after')).toBeNull();
  });
});
