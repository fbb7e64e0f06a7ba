import { scrypt, timingSafeEqual } from 'node:crypto';
import type { RandomBytes } from '../identity/keys.ts';

/**
 * Password hashes: scrypt (RFC 7914, from node:crypto, run on libuv's thread pool so the event
 * loop never waits for it) with a 16-byte random salt and a 32-byte output, in the PHC string
 * format `$scrypt$ln=<log2 N>,r=<r>,p=<p>$<salt>$<hash>` (base64 without padding), so that the
 * parameters travel with each hash and can be raised later: a login with a hash made with weaker
 * parameters than {@link PASSWORD_HASH_PARAMS} reports `rehash` and the caller stores a new one.
 *
 * Parameters: N = 2^15, r = 8, p = 3 (32 MiB, about 0.1 s of one core per check on this class of
 * machine), one of OWASP's equivalent recommendations for scrypt (2^17/8/1 costs 128 MiB per
 * concurrent check, too much for a gateway replica under a guessing attack).
 */

export interface PasswordHashParams {
  /** log2 of the CPU/memory cost N. */
  readonly logN: number;
  /** Block size. */
  readonly r: number;
  /** Parallelization. */
  readonly p: number;
}

export const PASSWORD_HASH_PARAMS: PasswordHashParams = { logN: 15, r: 8, p: 3 };
/** Shortest password accepted when one is set (NIST SP 800-63B: at least 8). */
export const MIN_PASSWORD_LENGTH = 8;
/** Longest password accepted: bounds the work a request can ask for. */
export const MAX_PASSWORD_LENGTH = 1024;

const SALT_BYTES = 16;
const HASH_BYTES = 32;
/** Parameters a stored hash may carry; anything outside is refused as malformed (no work bomb). */
const LIMITS = { logN: [10, 20], r: [1, 32], p: [1, 16] } as const;
const PHC =
  /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{16,64})\$([A-Za-z0-9+/]{32,128})$/;

/** Why a new password cannot be used. The message never quotes the password. */
export class UnusablePassword extends Error {
  override readonly name = 'UnusablePassword';
}

/** Unicode passwords compare as the same characters however they were typed (NFC). */
const normalize = (password: string) => password.normalize('NFC');

/** Undefined when `password` may be set; otherwise why not. */
export function passwordProblem(password: unknown): UnusablePassword | undefined {
  if (typeof password !== 'string') return new UnusablePassword('the password must be a string');
  const length = [...normalize(password)].length;
  if (length < MIN_PASSWORD_LENGTH)
    return new UnusablePassword(`the password must have at least ${MIN_PASSWORD_LENGTH} characters`);
  if (length > MAX_PASSWORD_LENGTH)
    return new UnusablePassword(`the password must have at most ${MAX_PASSWORD_LENGTH} characters`);
  return undefined;
}

function derive(password: string, salt: Buffer, params: PasswordHashParams): Promise<Buffer> {
  const N = 2 ** params.logN;
  return new Promise((resolve, reject) => {
    scrypt(
      normalize(password),
      salt,
      HASH_BYTES,
      { N, r: params.r, p: params.p, maxmem: 256 * N * params.r + 1024 * 1024 },
      (err, key) => (err ? reject(err) : resolve(key)),
    );
  });
}

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');

/** A new hash of `password` (which the caller checked with {@link passwordProblem}). */
export async function hashPassword(
  password: string,
  random: RandomBytes,
  params: PasswordHashParams = PASSWORD_HASH_PARAMS,
): Promise<string> {
  const salt = Buffer.from(random(SALT_BYTES));
  if (salt.length < SALT_BYTES) throw new RangeError('random source returned too few bytes');
  const hash = await derive(password, salt, params);
  return `$scrypt$ln=${params.logN},r=${params.r},p=${params.p}$${b64(salt)}$${b64(hash)}`;
}

interface ParsedHash {
  readonly params: PasswordHashParams;
  readonly salt: Buffer;
  readonly hash: Buffer;
}

function parseHash(encoded: string): ParsedHash | undefined {
  const match = PHC.exec(encoded);
  if (!match) return undefined;
  const [logN, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const within = (value: number, [min, max]: readonly [number, number]) => value >= min && value <= max;
  if (!within(logN, LIMITS.logN) || !within(r, LIMITS.r) || !within(p, LIMITS.p)) return undefined;
  const hash = Buffer.from(match[5] as string, 'base64');
  if (hash.length !== HASH_BYTES) return undefined;
  return { params: { logN, r, p }, salt: Buffer.from(match[4] as string, 'base64'), hash };
}

/**
 * A fixed hash with parameters `params` to verify against when there is none, so a missing user
 * costs what a wrong password does.
 */
const dummyHash = (params: PasswordHashParams): ParsedHash => ({
  params,
  salt: Buffer.alloc(SALT_BYTES, 7),
  hash: Buffer.alloc(HASH_BYTES),
});

export interface PasswordCheck {
  readonly ok: boolean;
  /** The password matched a hash made with weaker parameters than today's: store a new hash. */
  readonly rehash: boolean;
}

/**
 * Whether `password` matches the stored hash, compared in constant time. A missing or malformed
 * stored hash (or an over-long password) is checked against a dummy hash with today's parameters
 * (`params`, {@link PASSWORD_HASH_PARAMS} but in tests) and never matches, so neither existence
 * nor shape of the stored value shows in the time taken.
 */
export async function verifyPassword(
  password: string,
  stored: string | undefined,
  params: PasswordHashParams = PASSWORD_HASH_PARAMS,
): Promise<PasswordCheck> {
  const parsed = stored === undefined ? undefined : parseHash(stored);
  const usable =
    parsed !== undefined && typeof password === 'string' && password.length <= MAX_PASSWORD_LENGTH * 4;
  const target = usable ? parsed : dummyHash(params);
  const derived = await derive(usable ? password : '', target.salt, target.params);
  const equal = timingSafeEqual(derived, target.hash);
  const ok = usable && equal;
  const weaker = target.params.logN < params.logN || target.params.r < params.r || target.params.p < params.p;
  return { ok, rehash: ok && weaker };
}
