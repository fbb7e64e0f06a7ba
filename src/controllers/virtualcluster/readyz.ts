import { request } from 'node:https';
import type { Connection } from '../../clusters/connection.ts';
import type { Reachability } from '../../clusters/reachability.ts';

/**
 * Whether a provisioned virtual cluster's apiserver is ready: `GET /readyz` with the instance's
 * admin credential (its connection: CA, client certificate or token), verified by the instance's
 * CA. `/readyz` answers plain text, which the JSON client does not read; hence this one request of
 * its own. Only the status code is reported, never the body.
 */

const DEFAULT_TIMEOUT_MS = 5_000;

const fromBase64 = (value: string | undefined) =>
  value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');

export function readyzProbe(connection: Connection, timeoutMs = DEFAULT_TIMEOUT_MS): Promise<Reachability> {
  const url = new URL('/readyz', connection.server);
  const ca = fromBase64(connection.caData);
  const cert = fromBase64(connection.certData);
  const key = fromBase64(connection.keyData);
  const unreachable = (why: string): Reachability => ({
    reachable: false,
    reason: 'Unreachable',
    message: `the API server at ${connection.server} is not ready: ${why}`,
  });
  return new Promise((resolve) => {
    const req = request(
      url,
      {
        ...(ca ? { ca } : {}),
        ...(cert && key ? { cert, key } : {}),
        ...(connection.tlsServerName ? { servername: connection.tlsServerName } : {}),
        rejectUnauthorized: connection.skipTLSVerify !== true,
        headers: connection.token ? { Authorization: `Bearer ${connection.token}` } : {},
        timeout: timeoutMs,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status === 200) resolve({ reachable: true, username: '' });
          else if (status === 401)
            resolve({
              reachable: false,
              reason: 'Unauthorized',
              message: `the API server at ${connection.server} refused the admin credential (401)`,
            });
          else resolve(unreachable(`/readyz answered ${status}`));
        });
        res.on('error', (err) => resolve(unreachable(err.name)));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (err) => resolve(unreachable((err as NodeJS.ErrnoException).code ?? err.message)));
    req.end();
  });
}
