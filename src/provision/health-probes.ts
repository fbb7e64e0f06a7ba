import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { ComponentDescription } from './control-plane.ts';

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

/**
 * Whether a component of a virtual control plane answers its readiness probe. The apiserver's
 * certificate is the instance CA's (`caPem`); the controller manager's is self-signed.
 */
export function componentAnswers(component: ComponentDescription, caPem: string): Promise<boolean> {
  const { scheme, host, port, path } = component.readiness;
  if (scheme === 'HTTP') return httpOk(`http://${host}:${port}${path}`);
  const ca = component.name === 'kube-apiserver' ? caPem : undefined;
  return httpsOk(`https://${host}:${port}${path}`, ca, undefined);
}
