import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../../pki/certificates.ts';
import { readyzProbe } from './readyz.ts';

/**
 * The /readyz probe of a provisioned virtual cluster against a real TLS server (loopback): it
 * verifies the server by the instance's CA, presents the admin's client certificate, and reports
 * only the status code.
 */

const b64 = (s: string) => Buffer.from(s).toString('base64');
let server: Server;
let connection: { server: string; caData: string; certData: string; keyData: string };
let answer = { status: 200, body: 'ok' };
let clientCertPresented = false;

beforeAll(async () => {
  const ca = await createCertificateAuthority('readyz test CA', 3600);
  const serving = await issueCertificate(ca, {
    commonName: 'kube-apiserver',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validForSeconds: 3600,
  });
  const admin = await issueCertificate(ca, { commonName: 'admin', usage: 'client', validForSeconds: 3600 });
  server = createServer(
    {
      cert: serving.certPem,
      key: serving.keyPem,
      ca: ca.certPem,
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      clientCertPresented = (req.socket as import('node:tls').TLSSocket).authorized;
      res.statusCode = req.url === '/readyz' ? answer.status : 404;
      res.end(answer.body);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  connection = {
    server: `https://127.0.0.1:${port}`,
    caData: b64(ca.certPem),
    certData: b64(admin.certPem),
    keyData: b64(admin.keyPem),
  };
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('readyzProbe', () => {
  it('200 from /readyz, verified by the CA, with the client certificate: reachable', async () => {
    answer = { status: 200, body: 'ok' };
    expect(await readyzProbe(connection)).toEqual({ reachable: true, username: '' });
    expect(clientCertPresented).toBe(true);
  });

  it('401: Unauthorized; another code: Unreachable with the code, never the body', async () => {
    answer = { status: 401, body: 'secret-looking body' };
    expect(await readyzProbe(connection)).toMatchObject({ reachable: false, reason: 'Unauthorized' });
    answer = { status: 500, body: '[-]etcd failed: secret-looking body' };
    const result = await readyzProbe(connection);
    expect(result).toMatchObject({ reachable: false, reason: 'Unreachable' });
    expect(JSON.stringify(result)).toContain('/readyz answered 500');
    expect(JSON.stringify(result)).not.toContain('secret-looking');
  });

  it('a server its CA did not sign is refused', async () => {
    const other = await createCertificateAuthority('another CA', 3600);
    answer = { status: 200, body: 'ok' };
    expect(await readyzProbe({ ...connection, caData: b64(other.certPem) })).toMatchObject({
      reachable: false,
      reason: 'Unreachable',
    });
  });

  it('nothing listening: Unreachable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    expect(await readyzProbe({ ...connection, server: `https://127.0.0.1:${port}` })).toMatchObject({
      reachable: false,
      reason: 'Unreachable',
    });
  });
});
