import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { INSTANCE, namespaceOf, useProvisionedEnv, WEB } from '../access-proxy/provisioned-env.ts';
import { kubectl } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { type Answer, call } from './support.ts';

/**
 * `POST .../virtualclusterinstances/<name>/kubeconfig` for a virtual cluster the platform
 * provisioned (processes provisioner, a real etcd, kube-apiserver and kube-controller-manager):
 * token mode through the access proxy, certificate mode straight to its apiserver with a
 * certificate its own CA signed (the controller manager's `--cluster-signing-*`).
 */
describe('gateway: kubeconfig of a provisioned virtual cluster', () => {
  const env = useProvisionedEnv();
  const retrieve = (token: string, spec: Record<string, unknown>) =>
    call(
      `${env().gateway.api}/namespaces/${namespaceOf(WEB)}/virtualclusterinstances/${INSTANCE}/kubeconfig`,
      {
        method: 'POST',
        token,
        dispatcher: env().gateway.dispatcher,
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ spec }),
      },
    );
  /** The kubeconfig alice is given, once the project roles' aggregation lets her ask. */
  const kubeConfigOf = async (spec: Record<string, unknown>) => {
    let answer: Answer | undefined;
    await eventually(
      async () => {
        answer = await retrieve(env().keys.alice, spec);
        return answer.status !== 403;
      },
      60_000,
      "the project roles' aggregation",
    );
    expect(answer?.status, answer?.text).toBe(201);
    return answer?.json.status.kubeConfig as string;
  };
  const write = (name: string, kubeConfig: string) => {
    const file = join(env().gateway.cluster!.kubeconfigPath, '..', `${name}.kubeconfig`);
    writeFileSync(file, kubeConfig, { mode: 0o600 });
    return file;
  };
  const listNamespaces = async (file: string) => {
    let listed = { code: -1, stdout: '', stderr: '' };
    await eventually(
      async () => {
        listed = await kubectl(['get', 'namespaces', '-o', 'name'], { kubeconfig: file });
        return listed.code === 0;
      },
      30_000,
      'kubectl to list namespaces',
    );
    return listed.stdout;
  };

  test('token mode: the access proxy path, and kubectl lists namespaces with it', async () => {
    await env().grantNamespaceList('alice');
    const kubeConfig = await kubeConfigOf({});
    const document = parseYaml(kubeConfig);
    expect(document.clusters[0].cluster.server).toBe(env().proxyUrl(WEB, INSTANCE));
    expect(document.users[0].user.token).toBeTruthy();
    expect(await listNamespaces(write('provisioned-token', kubeConfig))).toContain('namespace/kube-system');
  });

  test("certificate mode: the apiserver's own address and CA, a certificate of the instance's CA", async () => {
    await env().grantNamespaceList('alice');
    const kubeConfig = await kubeConfigOf({ clientCert: true });
    const document = parseYaml(kubeConfig);
    const cluster = document.clusters[0].cluster;
    expect(cluster.server).toBe(env().virtualServer);
    const caPem = Buffer.from(cluster['certificate-authority-data'], 'base64').toString();
    const certificate = new X509Certificate(
      Buffer.from(document.users[0].user['client-certificate-data'], 'base64'),
    );
    expect(certificate.subject).toContain('CN=alice');
    expect(certificate.checkIssued(new X509Certificate(caPem))).toBe(true);
    expect(certificate.verify(new X509Certificate(caPem).publicKey)).toBe(true);
    expect(await listNamespaces(write('provisioned-cert', kubeConfig))).toContain('namespace/kube-system');
  });
});
