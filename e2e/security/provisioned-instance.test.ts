import { describe, expect, test } from 'vitest';
import { provisionedAdminSecretName } from '../../src/clusters/provisioned-connection.ts';
import {
  INSTANCE,
  namespaceOf,
  SHOP,
  SHOP_INSTANCE,
  useProvisionedEnv,
  WEB,
} from '../access-proxy/provisioned-env.ts';
import { call } from '../gateway/support.ts';
import { rawRequest } from '../support/access-proxy.ts';
import { eventually } from '../support/wait.ts';

/**
 * The admin credential of a provisioned virtual cluster (its Secret `vc-<name>-admin` in the
 * project's namespace: system:masters there) against tenants (issue 27, ADR 0029 "Reaching a
 * provisioned instance"): members who may not read the namespace's Secrets (viewers) do not read
 * it, members of other projects neither read it nor reach the virtual cluster as anyone but
 * themselves, nor get a kubeconfig for it.
 */
describe('security: a provisioned instance and its admin credential', () => {
  const env = useProvisionedEnv();
  const adminSecret = provisionedAdminSecretName(INSTANCE);
  const spacePath = (project: string, namespace: string, rest: string) =>
    `${env().gateway.server.url}/kubernetes/project/${project}/space/${namespace}${rest}`;
  const get = (url: string, token: string, headers: Record<string, string> = {}) =>
    rawRequest(url, env().gateway.dispatcher, { headers: { authorization: `Bearer ${token}`, ...headers } });
  const secretPath = (namespace: string, name = adminSecret) =>
    `/api/v1/namespaces/${namespace}/secrets/${name}`;
  const kubeConfigFor = (token: string, project: string, instance: string, spec: Record<string, unknown>) =>
    call(
      `${env().gateway.api}/namespaces/${namespaceOf(project)}/virtualclusterinstances/${instance}/kubeconfig`,
      {
        method: 'POST',
        token,
        dispatcher: env().gateway.dispatcher,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ spec }),
      },
    );

  test("a viewer of the project does not read the instance's admin Secret; its owner does (ADR 0029)", async () => {
    const { alice, carol } = env().keys;
    const web = namespaceOf(WEB);
    // The owner (platform-project-admin, aggregated from `admin`) reads every Secret of the
    // namespace, this one included: that is how the project administers its virtual cluster.
    // Waiting for it also waits for the project roles' aggregation, so the refusal below is RBAC's.
    await eventually(
      async () => (await get(spacePath(WEB, web, secretPath(web)), alice)).status === 200,
      60_000,
      'the owner to read the Secret through the space',
    );
    const asViewer = await get(spacePath(WEB, web, secretPath(web)), carol);
    expect(asViewer.status).toBe(403);
    expect(asViewer.json.message).toContain('User "carol" cannot get resource "secrets"');
    const listed = await get(spacePath(WEB, web, `/api/v1/namespaces/${web}/secrets`), carol);
    expect(listed.status).toBe(403);
    expect(listed.body.toString()).not.toContain('client-key-data');
  });

  test("another project's member reads no admin Secret of the project, by its space or their own", async () => {
    const { bob } = env().keys;
    const web = namespaceOf(WEB);
    const shop = namespaceOf(SHOP);
    // Positive control: bob reads his own project's admin Secret through his space.
    await eventually(
      async () =>
        (await get(spacePath(SHOP, shop, secretPath(shop, provisionedAdminSecretName(SHOP_INSTANCE))), bob))
          .status === 200,
      60_000,
      'bob to read his own project Secret',
    );
    const viaWebSpace = await get(spacePath(WEB, web, secretPath(web)), bob);
    expect(viaWebSpace.status).toBe(403);
    const viaOwnSpace = await get(spacePath(SHOP, shop, secretPath(web)), bob);
    expect([403, 404]).toContain(viaOwnSpace.status);
    for (const answer of [viaWebSpace, viaOwnSpace])
      expect(answer.body.toString()).not.toContain('kubeconfig');
  });

  test("another project's member reaches the virtual cluster only as themselves", async () => {
    const { bob } = env().keys;
    const url = `${env().proxyUrl(WEB, INSTANCE)}/api/v1/namespaces`;
    const asBob = await get(url, bob);
    expect(asBob.status).toBe(403);
    expect(asBob.json.message).toContain('User "bob" cannot list resource "namespaces"');
    // Asking the platform to act as someone else there is refused before anything is sent.
    const impersonations: Record<string, string>[] = [
      { 'impersonate-user': 'system:admin' },
      { 'impersonate-group': 'system:masters' },
    ];
    for (const headers of impersonations) {
      const impersonating = await get(url, bob, headers);
      expect(impersonating.status).toBe(403);
      expect(impersonating.json.message).toMatch(/impersonate/i);
      expect(impersonating.body.toString()).not.toContain('kube-system');
    }
  });

  test("the kubeconfig endpoint refuses another project's instance in both modes", async () => {
    const { bob } = env().keys;
    // Positive control: bob gets kubeconfigs of his own project's instance in both modes.
    for (const spec of [{}, { clientCert: true }])
      await eventually(
        async () => (await kubeConfigFor(bob, SHOP, SHOP_INSTANCE, spec)).status === 201,
        60_000,
        `bob's kubeconfig of his own instance (${JSON.stringify(spec)})`,
      );
    for (const spec of [{}, { clientCert: true }]) {
      const refused = await kubeConfigFor(bob, WEB, INSTANCE, spec);
      expect(refused.status).toBe(403);
      expect(refused.json.message).toContain('cannot create resource "virtualclusterinstances/kubeconfig"');
      expect(refused.text).not.toContain('client-key-data');
    }
  });
});
