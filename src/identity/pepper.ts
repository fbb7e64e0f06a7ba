import { isAlreadyExists, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { MIN_PEPPER_BYTES, type RandomBytes } from './keys.ts';

/**
 * The access-key pepper: the HMAC key under which `OwnedAccessKey.spec.keyHash` is computed. It
 * lives in a core Secret of the platform namespace (never next to the hashes), created once by
 * whichever operator replica first needs it. Replicas race safely: creation is by name, the loser
 * of the race reads the winner's pepper.
 */

export const PEPPER_SECRET_NAME = 'platform-access-key-pepper';
export const PEPPER_SECRET_KEY = 'pepper';
/** Bytes of a newly generated pepper (256 bits). */
const PEPPER_BYTES = 32;

/** The pepper Secret exists but does not hold a usable pepper. The message never shows its content. */
export class InvalidPepperSecret extends Error {
  override readonly name = 'InvalidPepperSecret';
  constructor(namespace: string) {
    super(
      `Secret ${namespace}/${PEPPER_SECRET_NAME} has no key "${PEPPER_SECRET_KEY}" of at least ${MIN_PEPPER_BYTES} bytes`,
    );
  }
}

/** The pepper Secret was created and deleted again while we tried to read it; retrying is safe. */
class PepperSecretVanished extends Error {
  override readonly name = 'PepperSecretVanished';
}

const secretPath = (namespace: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;

interface SecretBody {
  data?: Record<string, string>;
}

/** Reads the pepper out of a Secret body; pure. */
export function pepperFromSecret(secret: SecretBody, namespace: string): Uint8Array {
  const encoded = secret.data?.[PEPPER_SECRET_KEY];
  const bytes = encoded === undefined ? undefined : Buffer.from(encoded, 'base64');
  if (!bytes || bytes.length < MIN_PEPPER_BYTES) throw new InvalidPepperSecret(namespace);
  return new Uint8Array(bytes);
}

/** The Secret holding a fresh pepper; pure given `random`. */
export function pepperSecret(namespace: string, random: RandomBytes) {
  const bytes = random(PEPPER_BYTES);
  if (bytes.length < PEPPER_BYTES) throw new RangeError('random source returned too few bytes');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: PEPPER_SECRET_NAME,
      namespace,
      labels: { 'app.kubernetes.io/part-of': 'platform', 'app.kubernetes.io/component': 'access-keys' },
    },
    type: 'Opaque',
    immutable: true,
    data: { [PEPPER_SECRET_KEY]: Buffer.from(bytes.subarray(0, PEPPER_BYTES)).toString('base64') },
  };
}

/**
 * Loads (and on demand creates) the pepper. Once read, the pepper is cached for the life of the
 * process: the Secret is immutable, so it cannot change under us.
 */
export class PepperStore {
  private cached: Uint8Array | undefined;

  constructor(
    private readonly api: KubeApi,
    private readonly namespace: string,
    private readonly random: RandomBytes,
  ) {}

  /** The pepper, or undefined when the Secret does not exist. Never writes. */
  async load(): Promise<Uint8Array | undefined> {
    if (this.cached) return this.cached;
    try {
      const secret = await this.api.request<SecretBody>({
        method: 'GET',
        path: secretPath(this.namespace, PEPPER_SECRET_NAME),
      });
      this.cached = pepperFromSecret(secret, this.namespace);
      return this.cached;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** The pepper, creating the Secret when it does not exist (not for dry-run requests). */
  async ensure(): Promise<Uint8Array> {
    const existing = await this.load();
    if (existing) return existing;
    try {
      await this.api.request({
        method: 'POST',
        path: secretPath(this.namespace),
        body: pepperSecret(this.namespace, this.random),
      });
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
    // Read back rather than trusting our own bytes: another replica may have won the race.
    const created = await this.load();
    if (!created)
      throw new PepperSecretVanished(
        `Secret ${this.namespace}/${PEPPER_SECRET_NAME} vanished after creation`,
      );
    return created;
  }
}
