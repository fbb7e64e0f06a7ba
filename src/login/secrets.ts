import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { CompactEncrypt, compactDecrypt } from 'jose';

/**
 * Keys of the login flows, derived (HKDF-SHA-256) from the platform's access-key pepper, so every
 * gateway replica has them without another Secret, and each purpose has its own key:
 * - the transaction key encrypts and authenticates (JWE `dir` + `A256GCM`) the short-lived cookie
 *   that carries a sign-in's state, nonce and PKCE verifier from the redirect to the callback;
 * - the device key signs device tokens (see `throttle.ts`).
 */

export interface LoginSecrets {
  readonly transactionKey: Uint8Array;
  readonly deviceKey: Uint8Array;
}

const derive = (pepper: Uint8Array, info: string) =>
  new Uint8Array(hkdfSync('sha256', pepper, new Uint8Array(0), info, 32));

export function loginSecrets(pepper: Uint8Array): LoginSecrets {
  return {
    transactionKey: derive(pepper, 'platform login transaction v1'),
    deviceKey: derive(pepper, 'platform login device token v1'),
  };
}

/** A sealed value could not be opened: tampered, expired, made with another key, or not ours. */
export class SealBroken extends Error {
  override readonly name = 'SealBroken';
  constructor() {
    super('the sign-in state is missing, expired or invalid; start the sign-in again');
  }
}

/** Encrypts `value` (JSON) so only this platform can read it, until `expiresAt` (ms). */
export async function seal(value: unknown, key: Uint8Array, expiresAt: number): Promise<string> {
  const payload = new TextEncoder().encode(JSON.stringify({ v: value, exp: expiresAt }));
  return new CompactEncrypt(payload).setProtectedHeader({ alg: 'dir', enc: 'A256GCM' }).encrypt(key);
}

/** The value {@link seal} sealed, or {@link SealBroken}. */
export async function unseal(token: string | undefined, key: Uint8Array, now: number): Promise<unknown> {
  if (!token || token.length > 8192) throw new SealBroken();
  let parsed: { v?: unknown; exp?: unknown };
  try {
    const { plaintext } = await compactDecrypt(token, key, {
      keyManagementAlgorithms: ['dir'],
      contentEncryptionAlgorithms: ['A256GCM'],
    });
    parsed = JSON.parse(new TextDecoder().decode(plaintext));
  } catch {
    throw new SealBroken();
  }
  if (typeof parsed.exp !== 'number' || parsed.exp <= now) throw new SealBroken();
  return parsed.v;
}

/** HMAC-SHA-256 of `text` under `key`, base64url. */
export const mac = (text: string, key: Uint8Array) =>
  createHmac('sha256', key).update(text, 'utf8').digest('base64url');

/** Constant-time equality of two base64url MACs. */
export function macEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'base64url');
  const right = Buffer.from(b, 'base64url');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}
