import { createHash } from 'node:crypto';

const MAX_NAME = 63;
const HASH_LENGTH = 10;

/**
 * A child object's name: readable, at most 63 characters, a valid DNS label, and collision-free.
 * A hash of the exact identity ends every name, so two different identities can only share a
 * name through a SHA-256 prefix collision, while truncation and character folding only shorten
 * the readable part.
 */
export function hashedChildName(readable: string, identity: string): string {
  const hash = createHash('sha256').update(identity).digest('hex').slice(0, HASH_LENGTH);
  const prefix = readable
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .slice(0, MAX_NAME - HASH_LENGTH - 1)
    .replace(/-+$/, '');
  return `${prefix}-${hash}`;
}
