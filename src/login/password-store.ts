import { createHash } from 'node:crypto';
import type { User } from '../api/identity.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';

/**
 * Where password hashes live: one core Secret per user in the platform namespace (never in the
 * User object, which many may read), holding the hash, the user's name and its uid. The Secret is
 * owned by the User, so deleting the User deletes its password; a User deleted and created again
 * under the same name has a new uid and so no password until one is set.
 */

export const PASSWORD_SECRET_PREFIX = 'platform-password-';
export const PASSWORD_SECRET_TYPE = 'management.platform/password';

/** The Secret name of a user's password (a hash of the name when the name is too long to prefix). */
export function passwordSecretName(user: string): string {
  const name = `${PASSWORD_SECRET_PREFIX}${user}`;
  return name.length <= 253
    ? name
    : `${PASSWORD_SECRET_PREFIX}${createHash('sha256').update(user).digest('hex')}`;
}

interface SecretBody {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

const decode = (value: string | undefined) =>
  value === undefined ? undefined : Buffer.from(value, 'base64').toString('utf8');

export class PasswordStore {
  constructor(
    private readonly api: KubeApi,
    private readonly namespace: string,
  ) {}

  private path(name?: string) {
    const base = `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/secrets`;
    return name === undefined ? base : `${base}/${encodeURIComponent(name)}`;
  }

  /** The stored hash of this User (matched by name and uid), or undefined. */
  async hashOf(user: Pick<User, 'metadata'>): Promise<string | undefined> {
    const name = user.metadata.name ?? '';
    let secret: SecretBody;
    try {
      secret = await this.api.request<SecretBody>({
        method: 'GET',
        path: this.path(passwordSecretName(name)),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    if (decode(secret.data?.user) !== name || decode(secret.data?.uid) !== user.metadata.uid)
      return undefined;
    return decode(secret.data?.hash);
  }

  /** Stores `hash` as the User's password (creating or replacing its Secret). */
  async store(user: Pick<User, 'metadata'>, hash: string): Promise<void> {
    const name = user.metadata.name ?? '';
    const uid = user.metadata.uid ?? '';
    const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
    const body = {
      apiVersion: 'v1',
      kind: 'Secret',
      type: PASSWORD_SECRET_TYPE,
      metadata: {
        name: passwordSecretName(name),
        namespace: this.namespace,
        ownerReferences: [
          { apiVersion: 'management.platform/v1', kind: 'User', name, uid, blockOwnerDeletion: false },
        ],
      },
      data: { user: b64(name), uid: b64(uid), hash: b64(hash) },
    };
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.api.request({ method: 'POST', path: this.path(), body });
        return;
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
      try {
        const current = await this.api.request<SecretBody>({
          method: 'GET',
          path: this.path(body.metadata.name),
        });
        await this.api.request({
          method: 'PUT',
          path: this.path(body.metadata.name),
          body: {
            ...body,
            metadata: { ...body.metadata, resourceVersion: current.metadata?.resourceVersion },
          },
        });
        return;
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) throw err;
      }
    }
    throw new Error('the password could not be stored: it kept changing concurrently');
  }
}
