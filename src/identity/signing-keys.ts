import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../api/labels.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';

/**
 * The keys that sign DirectClusterEndpointTokens, kept in a core Secret of the platform namespace
 * so that every gateway replica signs with the same key and publishes the same JWKS.
 *
 * Rotation (pure, {@link rotateKeyRing}):
 * - a new key is added when the signing key is older than the rotation period; it is published in
 *   the JWKS at once but signs only after `publishLeadMs`, so clusters that cache the JWKS learn it
 *   before they meet a token signed with it (the very first key signs at once: nothing caches yet);
 * - a key stops signing when its successor starts (`retiredAt`); it stays in the JWKS until every
 *   token it could have signed has expired (`retiredAt + maxTokenTtlMs`), then it is removed.
 * Replicas race safely: every change is a write with the Secret's resourceVersion, and the loser
 * of a race reads the winner's ring and rotates from there.
 */

export const SIGNING_KEYS_SECRET = 'platform-token-signing-keys';
const SIGNING_KEYS_KEY = 'keys.json';
export const SIGNING_ALGORITHM = 'ES256';

export interface SigningKey {
  readonly kid: string;
  readonly alg: typeof SIGNING_ALGORITHM;
  /** Private JWK (includes the public part). */
  readonly privateJwk: JWK;
  /** RFC 3339: when the key was made (and published). */
  readonly createdAt: string;
  /** RFC 3339: when it starts signing. */
  readonly signsFrom: string;
  /** RFC 3339: when its successor took over; unset while it is the newest key. */
  readonly retiredAt?: string;
}

export interface RotationPolicy {
  /** How long a key signs before a successor is made. */
  readonly rotationPeriodMs: number;
  /** How long a successor is published before it signs. */
  readonly publishLeadMs: number;
  /** The longest lifetime of a token (a retired key is kept this long). */
  readonly maxTokenTtlMs: number;
}

export const DEFAULT_ROTATION_POLICY: RotationPolicy = {
  rotationPeriodMs: 30 * 24 * 3600_000,
  publishLeadMs: 10 * 60_000,
  maxTokenTtlMs: 90 * 24 * 3600_000,
};

export type KeyFactory = () => Promise<{ kid: string; privateJwk: JWK }>;

/** A fresh ES256 key pair with a random kid. */
export const generateSigningKey: KeyFactory = async () => {
  const { privateKey } = await generateKeyPair(SIGNING_ALGORITHM, { extractable: true });
  const kid = randomUUID();
  return { kid, privateJwk: { ...(await exportJWK(privateKey)), kid, alg: SIGNING_ALGORITHM, use: 'sig' } };
};

const iso = (ms: number) => new Date(ms).toISOString();
const ms = (text: string | undefined) => (text === undefined ? Number.NaN : Date.parse(text));

/** The key that signs at `now`: the newest key whose `signsFrom` has passed. */
export function currentSigningKey(ring: readonly SigningKey[], now: number): SigningKey | undefined {
  return ring.filter((key) => ms(key.signsFrom) <= now).sort((a, b) => ms(b.signsFrom) - ms(a.signsFrom))[0];
}

/**
 * The ring as it should be at `now`, or the same array when nothing changes (so callers write only
 * on change). Pure apart from the key factory.
 */
export async function rotateKeyRing(
  ring: readonly SigningKey[],
  now: number,
  policy: RotationPolicy,
  generate: KeyFactory,
): Promise<readonly SigningKey[]> {
  // A key is retired the moment a successor starts signing.
  const bySignsFrom = [...ring].sort((a, b) => ms(a.signsFrom) - ms(b.signsFrom));
  let next = bySignsFrom.map((key, i) => {
    const successor = bySignsFrom[i + 1];
    if (key.retiredAt !== undefined || !successor || ms(successor.signsFrom) > now) return key;
    return { ...key, retiredAt: successor.signsFrom };
  });
  // It verifies until the last token it could have signed expires.
  next = next.filter((key) => key.retiredAt === undefined || ms(key.retiredAt) + policy.maxTokenTtlMs > now);
  const newest = next.at(-1);
  const newestSigns = newest !== undefined && ms(newest.signsFrom) <= now;
  if (newest === undefined || (newestSigns && ms(newest.createdAt) + policy.rotationPeriodMs <= now)) {
    const { kid, privateJwk } = await generate();
    const signsFrom = newest === undefined ? now : now + policy.publishLeadMs;
    next = [
      ...next,
      { kid, alg: SIGNING_ALGORITHM, privateJwk, createdAt: iso(now), signsFrom: iso(signsFrom) },
    ];
  }
  const same =
    next.length === ring.length && next.every((key, i) => JSON.stringify(key) === JSON.stringify(ring[i]));
  return same ? ring : next;
}

/** The public JWKS of the ring: every key that may still verify a token, private parts removed. */
export function publicJwks(ring: readonly SigningKey[]): { keys: JWK[] } {
  return {
    keys: ring.map(({ privateJwk }) => {
      const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = privateJwk;
      return publicJwk;
    }),
  };
}

interface SecretBody {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

/** The Secret's ring; an unreadable ring is an error (never silently replaced: tokens depend on it). */
export function ringFromSecret(secret: SecretBody | undefined): SigningKey[] {
  const encoded = secret?.data?.[SIGNING_KEYS_KEY];
  if (!encoded) return [];
  const parsed: unknown = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
  if (!Array.isArray(parsed)) throw new Error(`Secret ${SIGNING_KEYS_SECRET} does not hold a key list`);
  return parsed as SigningKey[];
}

const secretPath = (namespace: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;

/**
 * Reads, rotates and writes the ring in its Secret. `ensure` returns the ring as stored after any
 * rotation due at `now`; it retries a lost race with the winner's ring.
 */
export class SigningKeyStore {
  constructor(
    private readonly api: KubeApi,
    private readonly namespace: string,
    private readonly policy: RotationPolicy = DEFAULT_ROTATION_POLICY,
    private readonly generate: KeyFactory = generateSigningKey,
  ) {}

  async ensure(now: number): Promise<readonly SigningKey[]> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const secret = await this.read();
      const ring = ringFromSecret(secret);
      const next = await rotateKeyRing(ring, now, this.policy, this.generate);
      if (next === ring) return ring;
      const body = {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: {
          name: SIGNING_KEYS_SECRET,
          namespace: this.namespace,
          labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
          ...(secret?.metadata?.resourceVersion ? { resourceVersion: secret.metadata.resourceVersion } : {}),
        },
        type: 'Opaque',
        data: { [SIGNING_KEYS_KEY]: Buffer.from(JSON.stringify(next)).toString('base64') },
      };
      try {
        if (secret) {
          // A merge patch carrying the resourceVersion read: optimistic concurrency as with an
          // update, within the `patch` the operator holds on Secrets anyway.
          await this.api.request({
            method: 'PATCH',
            path: secretPath(this.namespace, SIGNING_KEYS_SECRET),
            contentType: 'application/merge-patch+json',
            body: { metadata: { resourceVersion: body.metadata.resourceVersion }, data: body.data },
          });
        } else {
          await this.api.request({ method: 'POST', path: secretPath(this.namespace), body });
        }
        return next;
      } catch (err) {
        // Another replica wrote first: start again from its ring.
        if (!isConflict(err) && !isAlreadyExists(err)) throw err;
      }
    }
    throw new Error(
      `could not update Secret ${this.namespace}/${SIGNING_KEYS_SECRET}: too many concurrent writers`,
    );
  }

  private async read(): Promise<SecretBody | undefined> {
    try {
      return await this.api.request<SecretBody>({
        method: 'GET',
        path: secretPath(this.namespace, SIGNING_KEYS_SECRET),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }
}
