import { createHash } from 'node:crypto';
import { CompactEncrypt, importJWK } from 'jose';

/**
 * Handing a new key to the `platform login` that asked for it, wherever the browser runs. The
 * command makes a key pair (X25519) for this one sign-in and sends the public key with the login
 * URL (`/auth/login?cli=<key>`); after the sign-in the platform encrypts what the command needs
 * (the key, its name, the user, the server) to it (JWE, ECDH-ES + A256GCM) as a code only that
 * command can open. The browser gives the code to the command's loopback listener when both are
 * on one machine (`&return=http://127.0.0.1:<port>/...`), or the page shows it for the person to
 * paste into the waiting command (the browser on a laptop, the command on a server). Either way
 * the key itself is on no page, in no URL, and at no other local listener.
 *
 * The page and the command both show a short verification code derived from the public key, so a
 * person can tell that the code on the page is for the terminal in front of them (a login URL
 * someone else sent would show another).
 */

/** What the code carries (JSON). */
export interface CliHandoff {
  readonly key: string;
  readonly keyName: string;
  readonly user: string;
  /** The management API's URL, for the kubeconfig. */
  readonly server: string;
}

/** The content encryption of the code: one key agreement, one AEAD (jose). */
export const CLI_HANDOFF_ALGORITHMS = { alg: 'ECDH-ES', enc: 'A256GCM' } as const;

/** `text` when it is an X25519 public key (32 bytes, base64url without padding), else undefined. */
export function cliPublicKey(text: string | null | undefined): string | undefined {
  if (!text || !/^[A-Za-z0-9_-]{43}$/.test(text)) return undefined;
  return Buffer.from(text, 'base64url').length === 32 ? text : undefined;
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The verification code of a public key: `XXXX-XXXX`, base32 of its SHA-256. */
export function verificationCode(publicKey: string): string {
  const digest = createHash('sha256').update(Buffer.from(publicKey, 'base64url')).digest();
  // 40 bits, 8 characters of 5 bits each.
  const bits = [...digest.subarray(0, 5)].map((byte) => byte.toString(2).padStart(8, '0')).join('');
  let out = '';
  for (let i = 0; i < 8; i++) out += BASE32[Number.parseInt(bits.slice(i * 5, i * 5 + 5), 2)];
  return `${out.slice(0, 4)}-${out.slice(4)}`;
}

/** The code for the command holding the private key of `publicKey` (a compact JWE). */
export async function sealForCli(publicKey: string, handoff: CliHandoff): Promise<string> {
  const key = await importJWK({ kty: 'OKP', crv: 'X25519', x: publicKey }, CLI_HANDOFF_ALGORITHMS.alg);
  const payload = new TextEncoder().encode(
    JSON.stringify({
      key: handoff.key,
      keyName: handoff.keyName,
      user: handoff.user,
      server: handoff.server,
    }),
  );
  return new CompactEncrypt(payload).setProtectedHeader({ ...CLI_HANDOFF_ALGORITHMS }).encrypt(key);
}
