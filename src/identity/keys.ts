import { createHmac, createSecretKey, type KeyObject, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { KEY_HASH_PATTERN } from '../api/ownedaccesskey.ts';

/**
 * Platform access keys.
 *
 * Format: `pak_<id>_<secret><checksum>`, always {@link ACCESS_KEY_LENGTH} (70) characters:
 *
 * | part     | length | alphabet                          | content                                        |
 * |----------|--------|-----------------------------------|------------------------------------------------|
 * | prefix   | 3 + 1  | `pak_`                            | "platform access key"; lets secret scanners match `pak_[a-z2-7]{16}_[0-9A-Za-z]{49}` |
 * | id       | 16 + 1 | RFC 4648 base32, lowercase (`a-z2-7`) | 10 random bytes; public, names the key (usable in a DNS-1123 object name) |
 * | secret   | 43     | base62 (`0-9A-Za-z`)              | 32 random bytes as a big-endian integer, left-padded with `0` |
 * | checksum | 6      | base62                            | CRC-32 of `pak_<id>_<secret>`, left-padded with `0` |
 *
 * The checksum is not a security measure: it lets the gateway tell typos from wrong keys (and
 * keep them off the apiserver: a malformed key is never looked up there), and lets scanners tell
 * real keys from lookalikes offline. Security rests on the 256-bit secret alone.
 *
 * At rest only {@link hashAccessKey}'s keyed hash is kept (`spec.keyHash`, with the id in `spec.keyId`) (HMAC-SHA-256 with a pepper that is not
 * stored next to the hash), so a leaked object store does not leak usable keys and the hash cannot
 * be brute-forced without the pepper.
 */

const ACCESS_KEY_PREFIX = 'pak';
const ACCESS_KEY_ID_LENGTH = 16;
const ACCESS_KEY_SECRET_LENGTH = 43;
const ACCESS_KEY_CHECKSUM_LENGTH = 6;
export const ACCESS_KEY_LENGTH =
  ACCESS_KEY_PREFIX.length +
  1 +
  ACCESS_KEY_ID_LENGTH +
  1 +
  ACCESS_KEY_SECRET_LENGTH +
  ACCESS_KEY_CHECKSUM_LENGTH;

/** Random bytes supplied by the caller (`crypto.randomBytes` in production, seeded in tests). */
export type RandomBytes = (size: number) => Uint8Array;

/** Shortest pepper accepted: as many bytes as the HMAC-SHA-256 output. */
export const MIN_PEPPER_BYTES = 32;

const ID_RANDOM_BYTES = 10; // 80 bits -> exactly 16 base32 characters
const SECRET_RANDOM_BYTES = 32;
const BASE32_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Offsets of the parts in a key's text. */
const ID_START = ACCESS_KEY_PREFIX.length + 1;
const SECRET_START = ID_START + ACCESS_KEY_ID_LENGTH + 1;
const CHECKSUM_START = SECRET_START + ACCESS_KEY_SECRET_LENGTH;

/**
 * Per ASCII code, the alphabets it belongs to: {@link IN_BASE32} (`a-z2-7`), {@link IN_BASE62}
 * (`0-9A-Za-z`). A table walk over the 70 characters is several times cheaper than a regular
 * expression with captures, and every request with a key pays it.
 */
const IN_BASE32 = 1;
const IN_BASE62 = 2;
const ALPHABETS = (() => {
  const table = new Uint8Array(128);
  for (const c of BASE32_ALPHABET) table[c.charCodeAt(0)]! |= IN_BASE32;
  for (const c of BASE62_ALPHABET) table[c.charCodeAt(0)]! |= IN_BASE62;
  return table;
})();

/** Whether every character of text[from, to) is in `alphabet` (codes above 127 are in none). */
function allIn(text: string, from: number, to: number, alphabet: number): boolean {
  for (let i = from; i < to; i++) {
    const code = text.charCodeAt(i);
    if (code > 127 || (ALPHABETS[code]! & alphabet) === 0) return false;
  }
  return true;
}

/** The text is not an access key of this platform (wrong length, alphabet, shape or checksum). */
export class MalformedAccessKey extends Error {
  override readonly name = 'MalformedAccessKey';
  constructor(readonly problem: 'length' | 'shape' | 'checksum') {
    // The message never quotes the text: it may be someone's mistyped secret.
    super(`not a platform access key (${problem})`);
  }
}

/** The pepper is too short to be a secret key for HMAC-SHA-256. */
export class WeakPepper extends Error {
  override readonly name = 'WeakPepper';
  constructor() {
    super(`the access key pepper must be at least ${MIN_PEPPER_BYTES} bytes`);
  }
}

/** The random source returned fewer bytes than asked for. */
export class ShortRandomBytes extends Error {
  override readonly name = 'ShortRandomBytes';
  constructor(wanted: number, got: number) {
    super(`random source returned ${got} bytes, ${wanted} wanted`);
  }
}

export interface ParsedAccessKey {
  /** Public identifier: 16 characters of lowercase base32; safe to log and to use in object names. */
  readonly id: string;
  /** The secret part (without the checksum). Never log it. */
  readonly secret: string;
}

export interface GeneratedAccessKey extends ParsedAccessKey {
  /** The whole key, shown to its owner exactly once. */
  readonly key: string;
}

function randomExactly(random: RandomBytes, size: number): Uint8Array {
  const bytes = random(size);
  if (bytes.length < size) throw new ShortRandomBytes(size, bytes.length);
  return bytes.subarray(0, size);
}

/** RFC 4648 base32 without padding; `bytes.length * 8` must be a multiple of 5. */
function base32(bytes: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32_ALPHABET[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  return out;
}

/** Big-endian unsigned integer in base62, left-padded with `0` to `width` characters. */
function base62(value: bigint, width: number): string {
  let out = '';
  let rest = value;
  while (rest > 0n) {
    out = BASE62_ALPHABET[Number(rest % 62n)] + out;
    rest /= 62n;
  }
  if (out.length > width) throw new RangeError('value does not fit the base62 width');
  return out.padStart(width, '0');
}

function bytesToBigInt(bytes: Uint8Array): bigint {
  let value = 0n;
  for (const byte of bytes) value = (value << 8n) | BigInt(byte);
  return value;
}

/** The largest secret 32 random bytes can give, in its key spelling. */
const MAX_SECRET = base62((1n << 256n) - 1n, ACCESS_KEY_SECRET_LENGTH);

function checksumOf(body: string): string {
  return base62(BigInt(crc32(body)), ACCESS_KEY_CHECKSUM_LENGTH);
}

/** A new key from 10 + 32 random bytes. The caller stores only {@link hashAccessKey} of `key`. */
export function generateAccessKey(random: RandomBytes): GeneratedAccessKey {
  const id = base32(randomExactly(random, ID_RANDOM_BYTES));
  const secret = base62(bytesToBigInt(randomExactly(random, SECRET_RANDOM_BYTES)), ACCESS_KEY_SECRET_LENGTH);
  return { id, secret, key: composeAccessKey(id, secret) };
}

/** The key text for an id and a secret, checksum included (the format is public: see above). */
export function composeAccessKey(id: string, secret: string): string {
  const body = `${ACCESS_KEY_PREFIX}_${id}_${secret}`;
  return body + checksumOf(body);
}

/**
 * Splits a key into id and secret, or says why it is not one. Strict: exact length, exact
 * alphabets per part, and a matching checksum. Does no lookup and touches no secret store, so it
 * is safe (and meant) to run before anything else on untrusted input.
 */
export function parseAccessKey(text: string): ParsedAccessKey | MalformedAccessKey {
  const parsed = parseAccessKeyShape(text);
  if (parsed instanceof MalformedAccessKey) return parsed;
  return checksumMatches(text) ? parsed : new MalformedAccessKey('checksum');
}

/**
 * {@link parseAccessKey} without the checksum: for a caller that checks {@link checksumMatches}
 * itself where it matters. The authentication decision does so only when no stored hash matched:
 * a key that matched one is the very text that was hashed, so its checksum can only tell what
 * the match already told (the checksum protects against typos, never against guessing).
 */
export function parseAccessKeyShape(text: string): ParsedAccessKey | MalformedAccessKey {
  const id = accessKeyIdOf(text);
  if (id instanceof MalformedAccessKey) return id;
  return { id, secret: text.slice(SECRET_START, CHECKSUM_START) };
}

/** `pak_` and the separator after the id, as character codes. */
const PREFIX_CODES = [...`${ACCESS_KEY_PREFIX}_`].map((c) => c.charCodeAt(0));
const SEPARATOR = 95; /* _ */

/**
 * {@link parseAccessKeyShape}'s checks, answering only the id: the request path's parse, which
 * makes no object but the id's text (the secret stays in the token; the HMAC covers it whole).
 */
export function accessKeyIdOf(text: string): string | MalformedAccessKey {
  if (text.length !== ACCESS_KEY_LENGTH) return new MalformedAccessKey('length');
  for (let i = 0; i < PREFIX_CODES.length; i++) {
    if (text.charCodeAt(i) !== PREFIX_CODES[i]) return new MalformedAccessKey('shape');
  }
  if (
    text.charCodeAt(SECRET_START - 1) !== SEPARATOR ||
    !allIn(text, ID_START, SECRET_START - 1, IN_BASE32) ||
    !allIn(text, SECRET_START, ACCESS_KEY_LENGTH, IN_BASE62) ||
    secretAboveMax(text)
  ) {
    return new MalformedAccessKey('shape');
  }
  return text.slice(ID_START, SECRET_START - 1);
}

/**
 * Whether the key's secret spells a number above 2^256 - 1, which 32 bytes cannot give: refused,
 * so that each key has one spelling. Fixed width and an alphabet in ASCII order: comparing the
 * characters compares the numbers, in place (no copy of the secret is made).
 */
function secretAboveMax(text: string): boolean {
  for (let i = 0; i < ACCESS_KEY_SECRET_LENGTH; i++) {
    const difference = text.charCodeAt(SECRET_START + i) - MAX_SECRET.charCodeAt(i);
    if (difference !== 0) return difference > 0;
  }
  return false;
}

/**
 * Whether the checksum of a text of the key's shape ({@link parseAccessKeyShape}) matches its
 * body. Compared as a number: a base62 spelling of every CRC would cost more than the parse.
 */
export function checksumMatches(text: string): boolean {
  return crc32(text.slice(0, CHECKSUM_START)) === base62Value(text.slice(CHECKSUM_START));
}

/** The number a base62 text spells (the text is known to be in the alphabet). */
function base62Value(text: string): number {
  let value = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // 0-9, A-Z, a-z in ASCII order, as BASE62_ALPHABET.
    value = value * 62 + (code <= 57 ? code - 48 : code <= 90 ? code - 55 : code - 61);
  }
  return value;
}

/**
 * The pepper as a secret KeyObject, made once per pepper. HMAC with raw key bytes makes a new
 * KeyObject on every call inside Node, which costs four to five times the HMAC itself (measured by
 * bench/auth); the authenticator holds one pepper for its life, so its KeyObject is kept beside it.
 * A pepper is never changed in place (a new one is a new array).
 */
const pepperKeys = new WeakMap<Uint8Array, KeyObject>();
const stringPepperKeys = new Map<string, KeyObject>();

/** The pepper last asked for and its key: a process uses one pepper, asked for on every request. */
let lastPepper: Uint8Array | string | undefined;
let lastPepperKey: KeyObject | undefined;

function pepperKey(pepper: Uint8Array | string): KeyObject {
  if (pepper === lastPepper && lastPepperKey) return lastPepperKey;
  const cached = typeof pepper === 'string' ? stringPepperKeys.get(pepper) : pepperKeys.get(pepper);
  if (cached) {
    lastPepper = pepper;
    lastPepperKey = cached;
    return cached;
  }
  const bytes = typeof pepper === 'string' ? Buffer.from(pepper, 'utf8') : pepper;
  if (bytes.length < MIN_PEPPER_BYTES) throw new WeakPepper();
  const key = createSecretKey(bytes);
  if (typeof pepper === 'string') {
    // String peppers come from configuration and tests: a handful per process.
    if (stringPepperKeys.size >= 16) stringPepperKeys.clear();
    stringPepperKeys.set(pepper, key);
  } else {
    pepperKeys.set(pepper, key);
  }
  lastPepper = pepper;
  lastPepperKey = key;
  return key;
}

function hmac(key: string, pepper: Uint8Array | string): Buffer {
  return createHmac('sha256', pepperKey(pepper)).update(key, 'utf8').digest();
}

/**
 * The value stored instead of the key (`OwnedAccessKey.spec.keyHash`): 64 lowercase hex
 * characters of HMAC-SHA-256 over the whole key text (so the hash is bound to the id as well as
 * the secret) under `pepper`. Deterministic, so equal keys hash equally. Throws
 * {@link WeakPepper} for a pepper under 32 bytes. The stored form carries no algorithm tag because
 * `keyHash` is defined as exactly this (`KEY_HASH_PATTERN`); a future algorithm needs a new field.
 */
export function hashAccessKey(key: string, pepper: Uint8Array | string): string {
  return hmac(key, pepper).toString('hex');
}

/** A well-formed stored hash that no key produces in practice; see {@link verifyAccessKey}. */
export const UNMATCHABLE_ACCESS_KEY_HASH = '0'.repeat(64);

/**
 * Whether `key` hashes to `storedHash` under `pepper`. The comparison runs in constant time
 * over 32 bytes whatever the inputs: a stored hash of the wrong shape is compared like any other
 * (against zeros, then the answer is forced to false), so neither the key nor the stored value
 * changes the amount of work done. Callers that have no stored hash (unknown id) pass
 * {@link UNMATCHABLE_ACCESS_KEY_HASH} to spend the same work.
 */
export function verifyAccessKey(key: string, storedHash: string, pepper: Uint8Array | string): boolean {
  return digestMatches(accessKeyDigest(key, pepper), storedHash);
}

/** The HMAC of `key` under `pepper`, to compare with several stored hashes ({@link digestMatches}). */
export function accessKeyDigest(key: string, pepper: Uint8Array | string): Buffer {
  return hmac(key, pepper);
}

/** {@link verifyAccessKey} for a digest computed once: the same constant-time comparison. */
function digestMatches(digest: Buffer, storedHash: string): boolean {
  return digestMatchesStored(digest, decodeStoredHash(storedHash));
}

/**
 * A stored `spec.keyHash` as the bytes {@link digestMatchesStored} compares, or undefined when
 * it is not of the stored shape. Decoding once per stored object (the authenticator keeps the
 * bytes beside the cached object) saves a pattern test and a hex decode on every request.
 */
export function decodeStoredHash(storedHash: string): Buffer | undefined {
  return KEY_HASH_PATTERN.test(storedHash) ? Buffer.from(storedHash, 'hex') : undefined;
}

const NO_STORED_HASH = Buffer.alloc(32);

/**
 * Whether the digest equals the decoded stored hash, in constant time over 32 bytes whatever the
 * inputs: a missing or malformed stored hash is compared like any other (against zeros, then the
 * answer is forced to false).
 */
export function digestMatchesStored(digest: Uint8Array, stored: Uint8Array | undefined): boolean {
  const equal = timingSafeEqual(digest, stored ?? NO_STORED_HASH);
  return stored !== undefined && equal;
}
