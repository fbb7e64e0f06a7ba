import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fetch as undiciFetch } from 'undici';
import { ownValue, setOwnValue } from '../../runtime/json.ts';
import { dispatcherFor, platformBase, type SignedIn, type TlsOptions } from './signed-in.ts';

/**
 * `platform login --password`: a sign-in without a browser that keeps the device token the
 * platform hands out, to send with the next password sign-in of that user from this terminal
 * (docs/login.md).
 */

/** Where the device tokens of password sign-ins are kept. */
export function deviceTokensPath(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CONFIG_HOME || join(homedir(), '.config'), 'platform', 'device-tokens.json');
}

/** Device tokens by platform origin, then username. */
type DeviceTokens = Record<string, Record<string, string>>;

function readDeviceTokens(path: string): DeviceTokens {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as DeviceTokens) : {};
  } catch {
    return {};
  }
}

/** The device token kept for `username` at the platform `url`, if any. */
export function deviceTokenFor(path: string, url: string, username: string): string | undefined {
  // The username is data: `constructor` or `__proto__` finds a token only when one was kept for it.
  const forOrigin = ownValue(readDeviceTokens(path), new URL(url).origin);
  const token = forOrigin === undefined ? undefined : ownValue(forOrigin, username);
  return typeof token === 'string' ? token : undefined;
}

/**
 * Keeps `token` for `username` at the platform `url`: written beside the file and renamed over
 * it, readable by the owner only (0600, its directory 0700), other entries kept.
 */
export function keepDeviceToken(path: string, url: string, username: string, token: string): void {
  const tokens = readDeviceTokens(path);
  const origin = new URL(url).origin;
  setOwnValue(tokens, origin, { ...ownValue(tokens, origin), [username]: token });
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(tokens, null, 2)}\n`, { mode: 0o600 });
  chmodSync(temporary, 0o600);
  renameSync(temporary, path);
}

/**
 * A password sign-in against `<url>/auth/password/login` (JSON), sending the device token kept
 * at `deviceTokens` for this user there and keeping the one the platform answers with.
 */
export async function loginWithPassword(
  url: string,
  username: string,
  password: string,
  tls: TlsOptions = {},
  deviceTokens: string = deviceTokensPath(),
): Promise<SignedIn> {
  const deviceToken = deviceTokenFor(deviceTokens, url, username);
  const response = await undiciFetch(`${platformBase(url)}/auth/password/login`, {
    method: 'POST',
    dispatcher: dispatcherFor(tls),
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ username, password, ...(deviceToken ? { deviceToken } : {}) }),
  });
  const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
  if (!response.ok)
    throw new Error(typeof body.message === 'string' ? body.message : `sign-in failed (${response.status})`);
  if (typeof body.deviceToken === 'string' && body.deviceToken !== '')
    keepDeviceToken(deviceTokens, url, username, body.deviceToken);
  const { deviceToken: _kept, ...signedIn } = body;
  return signedIn as unknown as SignedIn;
}
