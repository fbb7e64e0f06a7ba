import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { GROUP_VERSION } from '../api/meta.ts';
import { type AccessKeyAuthenticator, BY_KEY_ID } from '../identity/authenticator.ts';
import { storedKeyVerdict } from './stored-admin-key.ts';

/** The last step of `platform dev`'s start: waiting until the admin's kubectl works through the gateway. */

/** GET `url` with a bearer token, trusting `caPem`; resolves the status code, rejects on connection errors. */
function probe(url: string, caPem: string, accessKey: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      url,
      { ca: caPem, timeout: 5_000, headers: { authorization: `Bearer ${accessKey}` } },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}

export interface GatewayAcceptsOptions {
  readonly authenticator: AccessKeyAuthenticator;
  readonly pepper: Uint8Array;
  readonly accessKey: string;
  /** The gateway's base URL, `https://127.0.0.1:<port>/kubernetes/management`. */
  readonly server: string;
  readonly caPem: string;
  readonly timeoutMs?: number;
}

/**
 * Waits until kubectl with admin.kubeconfig works: first until the gateway's caches know the key
 * and its user (checked in process, so the wait costs no failed authentications, which the
 * gateway would count against the key), then until one real request over HTTPS lists
 * SharedSecrets across namespaces (TLS, authentication and RBAC end to end).
 */
export async function waitUntilGatewayAccepts(options: GatewayAcceptsOptions): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  const { authenticator } = options;
  let last = 'the gateway caches are not synced';
  for (;;) {
    if (authenticator.ready()) {
      const verdict = storedKeyVerdict(options.accessKey, {
        lookupKey: (id) => authenticator.keys.byIndex(BY_KEY_ID, id),
        lookupUser: (name) => authenticator.users.get(name),
        lookupTeam: (name) => authenticator.teams.get(name),
        pepper: options.pepper,
        now: () => new Date(),
        limits: authenticator.config().auth,
      });
      if (verdict.keep) break;
      last = `the gateway does not accept the admin key yet (${verdict.reason})`;
    }
    if (Date.now() > deadline) throw new Error(`the gateway did not become usable: ${last}`);
    await sleep(100);
  }
  const url = `${options.server}/apis/${GROUP_VERSION}/sharedsecrets?limit=1`;
  for (;;) {
    const status = await probe(url, options.caPem, options.accessKey).catch(
      (err: unknown) => `${err instanceof Error ? err.message : String(err)}`,
    );
    if (status === 200) return;
    // 401 cannot be lag any more (the caches accepted the key): stop rather than earn a block.
    if (status === 401) throw new Error('the gateway refused the admin key (401)');
    last = typeof status === 'number' ? `listing SharedSecrets answered ${status}` : status;
    if (Date.now() > deadline) throw new Error(`the gateway did not become usable: ${last}`);
    await sleep(250);
  }
}
