import http from 'node:http';
import https from 'node:https';
import type { TargetConnection } from '../../src/gateway/access-proxy/target.ts';

/**
 * Requests through a resolved access proxy connection (`ProxyTargets.resolve`), as the relay
 * sends them: its agent, its server's path prefix, the platform's credential.
 */

/** A GET through a resolved connection, its answer as it streams (a watch). */
export function open(connection: TargetConnection, path: string): Promise<http.IncomingMessage> {
  const { server } = connection;
  const client = server.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    client
      .get(
        {
          host: server.hostname,
          port: server.port,
          path: `${server.pathname.replace(/\/$/, '')}${path}`,
          agent: connection.agent,
          headers: { accept: 'application/json', ...connection.credentials() },
        },
        resolve,
      )
      .on('error', reject);
  });
}

/** A GET through a resolved connection, read whole. */
export async function get(
  connection: TargetConnection,
  path: string,
): Promise<{ status: number; body: string }> {
  const response = await open(connection, path);
  let body = '';
  for await (const chunk of response) body += (chunk as Buffer).toString();
  return { status: response.statusCode ?? 0, body };
}
