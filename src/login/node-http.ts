import type { IncomingMessage, ServerResponse } from 'node:http';
import type { LoginEndpoints, LoginHttpRequest } from './endpoints.ts';

/** Largest request body a login endpoint reads (a SAML response is the biggest: a few KiB). */
export const MAX_LOGIN_BODY_BYTES = 256 * 1024;

/**
 * Serves the login endpoints on a plain node:http request (the gateway mounts them through its
 * own handler interface; `platform dev` and tests may use this directly). Returns false when the
 * path is not a login endpoint, so the caller answers it.
 */
export async function serveLogin(
  endpoints: LoginEndpoints,
  req: IncomingMessage,
  res: ServerResponse,
  context: { source: string; secure: boolean; caller?: LoginHttpRequest['caller'] },
): Promise<boolean> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_LOGIN_BODY_BYTES) {
      res.writeHead(413).end();
      return true;
    }
    chunks.push(chunk as Buffer);
  }
  const headers: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.headers))
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  const answer = await endpoints.handle({
    method: req.method ?? 'GET',
    url: req.url ?? '/',
    headers,
    body: chunks.length > 0 ? Buffer.concat(chunks).toString('utf8') : undefined,
    ...context,
  });
  if (!answer) return false;
  res.writeHead(answer.status, answer.headers).end(answer.body);
  return true;
}
