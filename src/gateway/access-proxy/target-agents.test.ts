import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { InvalidCredentials } from '../../clusters/connection.ts';
import { createCertificateAuthority, issueCertificate } from '../../pki/certificates.ts';
import { targetKey } from './managed-targets.ts';
import {
  agentPlan,
  connectionDigest,
  createTargetAgent,
  credentialHeaders,
  retireAgent,
  TargetConnectTimeout,
} from './target-agents.ts';

const b64 = (text: string) => Buffer.from(text).toString('base64');

describe('agentPlan', () => {
  it('decodes the CA, client certificate and key, keeps the server name, verifies and keeps sockets alive', () => {
    const plan = agentPlan({
      server: 'https://10.0.0.1:6443/prefix',
      caData: b64('CA PEM'),
      certData: b64('CERT PEM'),
      keyData: b64('KEY PEM'),
      tlsServerName: 'api.internal',
    });
    expect(plan.server.href).toBe('https://10.0.0.1:6443/prefix');
    expect(plan.options).toEqual({
      keepAlive: true,
      ca: Buffer.from('CA PEM'),
      cert: Buffer.from('CERT PEM'),
      key: Buffer.from('KEY PEM'),
      servername: 'api.internal',
      rejectUnauthorized: true,
    });
  });

  it('skips verification only when the kubeconfig says so, and sets no TLS material it was not given', () => {
    expect(agentPlan({ server: 'https://a:6443', skipTLSVerify: true }).options).toEqual({
      keepAlive: true,
      rejectUnauthorized: false,
    });
  });

  it.each([
    ['ftp://a', 'the server is not an http or https URL'],
    ['not a url', 'the server is not an http or https URL'],
    ['https://admin:hunter2@a:6443', 'the server URL may not hold a user name or password'],
    ['https://a:6443/?x=1', 'the server URL may not have a query or fragment'],
  ])('refuses the server %s without quoting it', (server, message) => {
    let thrown: unknown;
    try {
      agentPlan({ server });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidCredentials);
    expect((thrown as Error).message).toBe(message);
    expect((thrown as Error).message).not.toContain('hunter2');
  });
});

describe('credentialHeaders', () => {
  it('a token is a bearer credential, and wins over a user name', () => {
    expect(credentialHeaders({ server: 'https://a', token: 't0k', username: 'u' })).toEqual({
      authorization: 'Bearer t0k',
    });
  });
  it('a user name and password are basic', () => {
    expect(credentialHeaders({ server: 'https://a', username: 'u', password: 'p' })).toEqual({
      authorization: `Basic ${b64('u:p')}`,
    });
  });
  it('a client certificate sends no header', () => {
    expect(credentialHeaders({ server: 'https://a', certData: 'x', keyData: 'y' })).toEqual({});
  });
});

describe('connectionDigest', () => {
  it('is the same for the same connection, whatever the key order, and differs when a credential changes', () => {
    const digest = connectionDigest({ server: 'https://a', token: 'one' });
    expect(connectionDigest({ token: 'one', server: 'https://a' })).toBe(digest);
    expect(connectionDigest({ server: 'https://a', token: 'two' })).not.toBe(digest);
    expect(connectionDigest({ server: 'https://b', token: 'one' })).not.toBe(digest);
    expect(digest).not.toContain('one');
  });
});

describe('targetKey', () => {
  const namespaceOf = (project: string) => `p-${project}`;
  it('a Cluster by name; a virtual cluster by its namespace, from the project, and name', () => {
    expect(targetKey({ kind: 'Cluster', cluster: 'prod' }, namespaceOf)).toBe('Cluster/prod');
    expect(
      targetKey({ kind: 'ProjectVirtualCluster', project: 'a', virtualCluster: 'vc' }, namespaceOf),
    ).toBe('VirtualClusterInstance/p-a/vc');
  });
  it('a cluster named like a project path is another key than that virtual cluster', () => {
    expect(targetKey({ kind: 'Cluster', cluster: 'p-a/vc' }, namespaceOf)).not.toBe(
      targetKey({ kind: 'ProjectVirtualCluster', project: 'a', virtualCluster: 'vc' }, namespaceOf),
    );
  });
});

describe('createTargetAgent and retireAgent (real sockets on the loopback)', () => {
  const closers: Array<() => void> = [];
  afterEach(() => {
    for (const close of closers.splice(0)) close();
  });
  const listen = async (server: net.Server) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(() => server.close());
    return (server.address() as net.AddressInfo).port;
  };

  it('a server that accepts the TCP connection but never answers the TLS handshake fails with TargetConnectTimeout', async () => {
    const silent = net.createServer((socket) => closers.push(() => socket.destroy()));
    const port = await listen(silent);
    const agent = createTargetAgent(agentPlan({ server: `https://127.0.0.1:${port}` }), 200);
    closers.push(() => agent.destroy());
    const error = await new Promise<unknown>((resolve) => {
      https
        .get(`https://127.0.0.1:${port}/version`, { agent }, () => resolve(undefined))
        .on('error', resolve);
    });
    expect(error).toBeInstanceOf(TargetConnectTimeout);
    expect(error).toMatchObject({ code: 'ETIMEDOUT', timeoutMs: 200 });
  });

  it("a target's sockets share one TLS context, which verifies the target with the agent's CA", async () => {
    const ca = await createCertificateAuthority('target-ca', 3600);
    const serving = await issueCertificate(ca, {
      commonName: 'target',
      ipAddresses: ['127.0.0.1'],
      validForSeconds: 3600,
      usage: 'server',
    });
    const held: http.ServerResponse[] = [];
    const server = https.createServer(
      { cert: serving.certPem, key: serving.keyPem },
      (_request, response) => {
        response.writeHead(200).flushHeaders();
        held.push(response);
      },
    );
    closers.push(() => {
      for (const response of held) response.destroy();
    });
    const port = await listen(server);
    const agent = createTargetAgent(
      agentPlan({ server: `https://127.0.0.1:${port}`, caData: Buffer.from(ca.certPem).toString('base64') }),
      5000,
    );
    closers.push(() => agent.destroy());
    const contexts = vi.spyOn(tls, 'createSecureContext');
    closers.push(() => contexts.mockRestore());
    // Three answers held open at once (three watches): three sockets.
    const answers = await Promise.all(
      [1, 2, 3].map(
        () =>
          new Promise<http.IncomingMessage>((resolve, reject) => {
            https.get(`https://127.0.0.1:${port}/watch`, { agent }, resolve).on('error', reject);
          }),
      ),
    );
    expect(answers.map((answer) => answer.statusCode)).toEqual([200, 200, 200]);
    expect(new Set(answers.map((answer) => answer.socket)).size).toBe(3);
    expect(contexts).toHaveBeenCalledTimes(1);
  });

  it('a connected socket is not timed out while it waits for an answer (a quiet watch)', async () => {
    let answer: (() => void) | undefined;
    const slow = http.createServer((_request, response) => {
      answer = () => response.end('late');
    });
    const port = await listen(slow);
    const agent = createTargetAgent(agentPlan({ server: `http://127.0.0.1:${port}` }), 50);
    closers.push(() => agent.destroy());
    const body = new Promise<string>((resolve, reject) => {
      http
        .get(`http://127.0.0.1:${port}/`, { agent }, (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => {
            text += chunk.toString();
          });
          response.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    // Answered only after several connect timeouts have passed.
    await new Promise((resolve) => setTimeout(resolve, 300));
    answer!();
    expect(await body).toBe('late');
  });

  it('retiring an agent closes its idle sockets and lets an open stream finish, then closes its socket', async () => {
    const streams: http.ServerResponse[] = [];
    const server = http.createServer((request, response) => {
      if (request.url === '/stream') {
        response.write('first\n');
        streams.push(response);
      } else response.end('ok');
    });
    const port = await listen(server);
    const agent = createTargetAgent(agentPlan({ server: `http://127.0.0.1:${port}` }), 1000);
    closers.push(() => agent.destroy());
    const get = (path: string) =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        http.get(`http://127.0.0.1:${port}${path}`, { agent }, resolve).on('error', reject);
      });
    // The stream holds its socket; the other request gets one of its own, idle once answered.
    const stream = await get('/stream');
    const streamSocket = stream.socket;
    const idle = await get('/');
    idle.resume();
    await new Promise((resolve) => idle.on('end', resolve));
    await new Promise((resolve) => setImmediate(resolve));
    const idleSockets = Object.values(agent.freeSockets).flat();
    expect(idleSockets).toHaveLength(1);

    retireAgent(agent);
    expect(idleSockets[0]!.destroyed).toBe(true);
    expect(streamSocket.destroyed).toBe(false);
    let text = '';
    stream.on('data', (chunk: Buffer) => {
      text += chunk.toString();
    });
    streams[0]!.end('last\n');
    await new Promise((resolve) => stream.on('end', resolve));
    expect(text).toBe('first\nlast\n');
    await new Promise((resolve) => setImmediate(resolve));
    expect(Object.values(agent.freeSockets).flat()).toHaveLength(0);
    expect(streamSocket.destroyed).toBe(true);
  });
});
