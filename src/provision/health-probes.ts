import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/** The readiness probes of a local control plane's processes: true on a 200, false on anything else. */

/** An HTTP GET of `url` (etcd's `/health`). */
export function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = httpRequest(url, { timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** `ca` undefined means "any certificate": only for local health probes of self-signed components. */
export function httpsOk(url: string, ca: string | undefined, token: string | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      url,
      {
        timeout: 2_000,
        ...(ca ? { ca } : { rejectUnauthorized: false }),
        headers: token ? { authorization: `Bearer ${token}` } : {},
      },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}
