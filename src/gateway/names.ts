import { isAlreadyExists } from '../runtime/errors.ts';
import type { RandomBytes } from './auth/keys.ts';

/**
 * Names generated from a prefix, exactly as kube-apiserver does for `metadata.generateName`
 * (apiserver `names.SimpleNameGenerator`): the prefix, truncated to leave room, plus five random
 * characters from an alphabet without vowels (no accidental words) and without look-alikes, the
 * whole at most 63 characters. Our own code that names objects (the gateway creating keys) uses
 * this, and retries a create on a collision like the apiserver, answering 409 when every attempt
 * collides.
 */

export const MAX_GENERATED_NAME_LENGTH = 63;
export const RANDOM_SUFFIX_LENGTH = 5;
/** The longest prefix kept: 58 characters. */
export const MAX_PREFIX_LENGTH = MAX_GENERATED_NAME_LENGTH - RANDOM_SUFFIX_LENGTH;
/** kube-apiserver's `utilrand` alphabet: 27 characters. */
export const SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
/** Attempts of a create with a generated name: the first and kube-apiserver's seven retries. */
export const GENERATE_NAME_ATTEMPTS = 8;

/** Largest multiple of the alphabet size below 256: bytes at or above it are redrawn (no modulo bias). */
const UNBIASED_LIMIT = 256 - (256 % SUFFIX_ALPHABET.length);

/** `prefix` (cut to {@link MAX_PREFIX_LENGTH}) followed by a random suffix; pure given `random`. */
export function generateName(prefix: string, random: RandomBytes): string {
  let suffix = '';
  while (suffix.length < RANDOM_SUFFIX_LENGTH) {
    for (const byte of random(RANDOM_SUFFIX_LENGTH)) {
      if (byte >= UNBIASED_LIMIT || suffix.length === RANDOM_SUFFIX_LENGTH) continue;
      suffix += SUFFIX_ALPHABET[byte % SUFFIX_ALPHABET.length];
    }
  }
  return prefix.slice(0, MAX_PREFIX_LENGTH) + suffix;
}

/**
 * Every generated name collided with an existing object: the gateway answers it as kube-apiserver
 * would, 409 AlreadyExists.
 */
export class GeneratedNameConflict extends Error {
  override readonly name = 'GeneratedNameConflict';
  readonly code = 409;
  readonly reason = 'AlreadyExists';
  constructor(
    readonly prefix: string,
    readonly attempts: number,
  ) {
    super(`every name generated from "${prefix}" already exists (${attempts} attempts); try again`);
  }
}

/** Whether a create failed because the name exists (409 AlreadyExists, not a resourceVersion conflict). */
export { isAlreadyExists };

export interface CreateWithGeneratedNameOptions {
  readonly random: RandomBytes;
  readonly attempts?: number;
  /** Which errors mean "the name exists"; defaults to {@link isAlreadyExists}. */
  readonly isNameTaken?: (err: unknown) => boolean;
}

/**
 * Calls `create` with names generated from `prefix` until one does not collide. Other errors are
 * passed through at once; after `attempts` collisions it throws {@link GeneratedNameConflict}.
 */
export async function createWithGeneratedName<T>(
  prefix: string,
  create: (name: string) => Promise<T>,
  options: CreateWithGeneratedNameOptions,
): Promise<T> {
  const attempts = options.attempts ?? GENERATE_NAME_ATTEMPTS;
  const taken = options.isNameTaken ?? isAlreadyExists;
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      return await create(generateName(prefix, options.random));
    } catch (err) {
      if (!taken(err)) throw err;
    }
  }
  throw new GeneratedNameConflict(prefix, attempts);
}
