import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { call, useGatewayEnv } from '../gateway/support.ts';
import { kubectl } from '../support/cluster.ts';

/**
 * README.md, "The management gateway": kubectl sends tokens only over TLS, so a kubeconfig must
 * point at an HTTPS gateway (or the ingress). Against a plain-HTTP gateway the key, which works
 * there with curl, never arrives: kubectl is answered as an anonymous caller.
 */
describe('kubectl and a plain-HTTP gateway', () => {
  const env = useGatewayEnv();
  let key: string;
  let kubeconfig: string;

  beforeAll(async () => {
    key = await env().user('alice');
    kubeconfig = join(mkdtempSync(join(tmpdir(), 'kubectl-http-')), 'config');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
kind: Config
clusters: [{name: platform, cluster: {server: "${env().base}"}}]
users: [{name: alice, user: {token: "${key}"}}]
contexts: [{name: platform, context: {cluster: platform, user: alice}}]
current-context: platform
`,
      { mode: 0o600 },
    );
  });

  test('the key works over plain HTTP when sent, and kubectl does not send it', async () => {
    expect(env().base).toMatch(/^http:\/\//);
    const sent = await call(`${env().api}/ownedaccesskeys`, { token: key });
    expect(sent.status, sent.text).toBe(200);
    const run = await kubectl(['get', 'ownedaccesskeys.management.platform', '-v=6'], { kubeconfig });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/\b401\b/);
  });
});
