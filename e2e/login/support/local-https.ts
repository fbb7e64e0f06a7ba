import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  type CertificateAndKey,
  createCertificateAuthority,
  issueCertificate,
} from '../../../src/pki/certificates.ts';

/**
 * Plumbing of the local servers that stand in for hosted identity providers: HTTPS on loopback
 * with a certificate of a test CA, small request/response helpers. What each server answers is in
 * its own module, which names the provider documentation it follows.
 */

export interface LocalHttps {
  readonly url: string;
  /** `127.0.0.1:<port>` (for configuration fields that take a host name). */
  readonly host: string;
  readonly caPem: string;
  close(): Promise<void>;
}

let sharedCa: Promise<CertificateAndKey> | undefined;

/** One test CA for every stand-in of a test file. */
export function testCa(): Promise<CertificateAndKey> {
  sharedCa ??= createCertificateAuthority('provider-stand-ins-ca', 3600);
  return sharedCa;
}

export async function startLocalHttps(
  handle: (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void,
  options: { ownCa?: boolean } = {},
): Promise<LocalHttps> {
  // A CA of its own: a server nothing trusts but through its own settings (an `insecure` flag).
  const ca = options.ownCa ? await createCertificateAuthority('provider-own-ca', 3600) : await testCa();
  const serving = await issueCertificate(ca, {
    commonName: 'provider',
    ipAddresses: ['127.0.0.1'],
    usage: 'server',
    validForSeconds: 3600,
  });
  let base = '';
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', base);
    Promise.resolve(handle(req, res, url)).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String((err as Error).message));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  base = `https://127.0.0.1:${port}`;
  return {
    url: base,
    host: `127.0.0.1:${port}`,
    caPem: ca.certPem,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export async function readBody(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) body += (chunk as Buffer).toString('utf8');
  return body;
}

export function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
) {
  res
    .writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
    .end(JSON.stringify(body));
}

/** The bearer token of a request (`Authorization: Bearer <token>`, any case of the scheme). */
export function bearer(req: IncomingMessage): string | undefined {
  const match = /^bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
  return match?.[1]?.trim();
}

export const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
