import { connect } from 'node:tls';
import { describe, expect, test } from 'vitest';
import { CLUSTER, useAccessProxyEnv } from '../support/access-proxy.ts';

/**
 * An upgrade request (exec, attach, port-forward) goes through the gateway's same stages as any
 * other (issue 26): without a key 401, with impersonation headers of its own 403 naming them,
 * outside its key's scope 403 saying so, each a `Status` on the connection, which then closes;
 * an accepted one reaches the target as the caller (the target's RBAC answers for the
 * impersonated person). Elsewhere an upgrade request is an ordinary request, as before.
 */

interface RawAnswer {
  readonly status: number;
  readonly head: string;
  // biome-ignore lint/suspicious/noExplicitAny: a decoded Status
  readonly json: any;
}

describe('gateway pipeline: upgrade requests', () => {
  const env = useAccessProxyEnv();

  /** An upgrade request over TLS, written as kubectl's WebSocket exec writes it; the answer read until the connection closes. */
  function upgradeRequest(path: string, headers: Record<string, string>): Promise<RawAnswer> {
    const url = new URL(env().gateway.server.url);
    return new Promise((resolve, reject) => {
      const socket = connect({ host: url.hostname, port: Number(url.port), ca: env().gateway.caPem }, () => {
        const lines = [
          `GET ${path} HTTP/1.1`,
          `Host: ${url.host}`,
          'Connection: Upgrade',
          'Upgrade: websocket',
          'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
          'Sec-WebSocket-Version: 13',
          'Sec-WebSocket-Protocol: v5.channel.k8s.io',
          ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
        ];
        socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      });
      let text = '';
      socket.on('data', (chunk: Buffer) => {
        text += chunk.toString();
      });
      socket.once('error', reject);
      socket.once('close', () => {
        const split = text.indexOf('\r\n\r\n');
        const head = text.slice(0, split);
        const body = text.slice(split + 4);
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        resolve({ status: Number(head.split(' ')[1]), head, json });
      });
    });
  }

  const execPath = `/kubernetes/cluster/${CLUSTER}/api/v1/namespaces/work/pods/absent/exec?command=sh&stdin=true`;

  test('without a key: 401 Status, and the connection closes', async () => {
    const answer = await upgradeRequest(execPath, {});
    expect(answer.status).toBe(401);
    expect(answer.json).toMatchObject({ kind: 'Status', code: 401, reason: 'Unauthorized' });
  });

  test('with impersonation headers of its own: 403 naming them', async () => {
    const token = await env().keyFor('uma');
    const answer = await upgradeRequest(execPath, {
      Authorization: `Bearer ${token}`,
      'Impersonate-Group': 'system:masters',
    });
    expect(answer.status).toBe(403);
    expect(answer.json.message).toContain('impersonate-group');
  });

  test("outside the key's scope: 403 saying the scope refused it", async () => {
    const token = await env().keyFor('uma', { clusters: [{ cluster: 'elsewhere' }] });
    const answer = await upgradeRequest(execPath, { Authorization: `Bearer ${token}` });
    expect(answer.status).toBe(403);
    expect(answer.json.message).toMatch(/scope/);
  });

  test('accepted: the target answers as the impersonated person (its RBAC refuses uma the exec), relayed as an ordinary answer', async () => {
    const token = await env().keyFor('uma');
    const answer = await upgradeRequest(execPath, { Authorization: `Bearer ${token}` });
    expect(answer.status).toBe(403);
    expect(answer.head.toLowerCase()).not.toContain('upgrade: websocket');
    expect(answer.json).toMatchObject({ kind: 'Status', reason: 'Forbidden' });
    expect(answer.json.message).toContain('User "uma"');
  });

  test('an upgrade request to the management API is an ordinary request, answered as before', async () => {
    const token = await env().keyFor('uma');
    const answer = await upgradeRequest('/kubernetes/management/version', {
      Authorization: `Bearer ${token}`,
      Connection: 'close',
    });
    expect(answer.status).toBe(200);
    expect(answer.json).toHaveProperty('gitVersion');
  });
});
