import { writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { kubeConfigYaml } from '../../src/clusters/kubeconfig.ts';
import { freePort } from '../../src/dev/controlplane.ts';
import { connectCluster, rawRequest, useAccessProxyEnv } from '../support/access-proxy.ts';
import { kubectl } from '../support/cluster.ts';
import { eventually, waitForValue } from '../support/wait.ts';

/**
 * How the access proxy fails (issue 26, "Failures"): a target that cannot be reached, that refuses
 * the platform's credentials, or whose credentials Secret is missing answers 503 (or 502) with a
 * Status naming the cluster and the reason, before the client gives up (a client timeout that
 * fires fails the test: it is never reached when the proxy answers); a target that restarts
 * mid-watch ends the watch cleanly, and the client's next list works once it is back.
 */
describe('access proxy: failures', () => {
  const env = useAccessProxyEnv();
  /** A TCP server that accepts connections and never says a word (no TLS handshake). */
  let silent: Server;
  const silentSockets = new Set<Socket>();
  let token: string;
  /** The client's timeout: generous; the proxy must answer before it. */
  const CLIENT_TIMEOUT_MS = 90_000;

  beforeAll(async () => {
    token = await env().keyFor('fay');
    await env().grant('cluster', 'fay');
    silent = createServer((socket) => {
      silentSockets.add(socket);
      socket.on('close', () => silentSockets.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const socket of silentSockets) socket.destroy();
    await new Promise((resolve) => silent?.close(resolve));
  });

  const viaCluster = (cluster: string, upstream = '/api/v1/namespaces/work/configmaps') =>
    rawRequest(
      `${env().gateway.server.url}/kubernetes/cluster/${cluster}${upstream}`,
      env().gateway.dispatcher,
      {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
      },
    );
  const expectUnavailable = (
    answer: Awaited<ReturnType<typeof viaCluster>>,
    cluster: string,
    reason: RegExp,
  ) => {
    expect([502, 503]).toContain(answer.status);
    expect(answer.json).toMatchObject({ kind: 'Status', status: 'Failure', code: answer.status });
    expect(answer.json.message).toContain(`"${cluster}"`);
    expect(answer.json.message).toMatch(reason);
  };
  test.each([
    ['a closed port', async () => `https://127.0.0.1:${await freePort()}`],
    [
      'a server that never answers the TLS handshake',
      async () => `https://127.0.0.1:${(silent.address() as { port: number }).port}`,
    ],
  ])('unreachable (%s): 503 naming the cluster, before the client times out', async (_what, endpoint) => {
    const name = `down-${Math.random().toString(36).slice(2, 8)}`;
    await connectCluster(env().gateway, {
      name,
      endpoint: await endpoint(),
      caPem: env().connected.caPem,
      credentials: { token: 'unused' },
    });
    await eventually(async () => (await viaCluster(name)).status !== 404, 30_000, 'the Cluster known');
    expectUnavailable(await viaCluster(name), name, /unreachable|connect|timed out|refused/i);
  });

  test('the credentials Secret is missing: 503 naming the cluster and the reason', async () => {
    await connectCluster(env().gateway, {
      name: 'no-secret',
      endpoint: env().connected.server,
      caPem: env().connected.caPem,
    });
    await eventually(async () => (await viaCluster('no-secret')).status !== 404, 30_000, 'the Cluster known');
    expectUnavailable(await viaCluster('no-secret'), 'no-secret', /credentials/i);
    // kubectl shows that Status (its discovery would hide it behind its own 503 text), and gives
    // up on its own, before its request timeout.
    const result = await kubectlThrough('no-secret', [
      'get',
      '--raw',
      '/api/v1/namespaces/work/configmaps',
      '--request-timeout=90s',
    ]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('ServiceUnavailable');
    expect(result.stderr).toContain('"no-secret"');
    expect(result.stderr).not.toMatch(/deadline exceeded|Client.Timeout/);
  });

  test('the target refuses the platform credentials: 503 naming the cluster, never the 401', async () => {
    await connectCluster(env().gateway, {
      name: 'refused',
      endpoint: env().connected.server,
      caPem: env().connected.caPem,
      credentials: { token: 'not-a-token-the-target-knows' },
    });
    await eventually(async () => (await viaCluster('refused')).status !== 404, 30_000, 'the Cluster known');
    const answer = await viaCluster('refused');
    expectUnavailable(answer, 'refused', /credentials|unauthorized|refuse/i);
    expect(answer.status, 'a refused credential is not a broken exchange (502)').toBe(503);
    expect(answer.body.toString()).not.toContain('not-a-token-the-target-knows');
  });

  test('a target restarted mid-watch ends the watch cleanly; the next list works once it is back', async () => {
    const { prefix } = env().target('cluster');
    const response = await fetchStream(`${prefix}/api/v1/namespaces/work/configmaps?watch=1`);
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    const { start } = await env().stopTarget('cluster');
    // The stream ends (the chunked answer is finished), it neither hangs nor breaks off.
    let ended: 'done' | 'error' | undefined;
    const reading = (async () => {
      for (;;) {
        const { done } = await reader.read();
        if (done) return 'done' as const;
      }
    })().then(
      (outcome) => {
        ended = outcome;
      },
      () => {
        ended = 'error';
      },
    );
    await eventually(() => ended !== undefined, 60_000, 'the watch to end');
    await reading;
    expect(ended).toBe('done');

    await start();
    await waitForValue(
      'a list once the target is back',
      async () => {
        const answer = await viaCluster('edge');
        return { status: answer.status, body: answer.body.toString().slice(0, 500) };
      },
      (answer) => answer.status === 200,
      60_000,
    );
  });

  /** kubectl with a kubeconfig whose server is `/kubernetes/cluster/<cluster>`. */
  function kubectlThrough(cluster: string, args: string[]) {
    const path = join(env().connected.kubeconfigPath, '..', `${cluster}-through-proxy.kubeconfig`);
    writeFileSync(
      path,
      kubeConfigYaml({
        name: cluster,
        server: `${env().gateway.server.url}/kubernetes/cluster/${cluster}`,
        ...(env().gateway.caPem ? { caPem: env().gateway.caPem } : {}),
        credentials: { token },
      }),
      { mode: 0o600 },
    );
    return kubectl(args, { kubeconfig: path });
  }

  function fetchStream(url: string) {
    return undiciFetch(url, {
      headers: { authorization: `Bearer ${token}` },
      ...(env().gateway.dispatcher ? { dispatcher: env().gateway.dispatcher } : {}),
      signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
    });
  }
});
