import { createHash } from 'node:crypto';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import { GROUP_VERSION } from '../../api/meta.ts';
import type { OwnedAccessKey } from '../../api/ownedaccesskey.ts';
import { resources } from '../../api/resources.ts';
import { hashAccessKey } from '../../identity/keys.ts';
import { isNotFound } from '../../runtime/errors.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../../runtime/kube-client.ts';

/**
 * Where the OpenID provider keeps what it issues (oidc-provider's adapter contract, one adapter
 * per model):
 * - refresh tokens are OwnedAccessKeys of `type: OIDCRefreshToken` with `spec.oidcProvider` (the
 *   client, nonce and scopes), named after and holding only the token's keyed hash (HMAC-SHA-256
 *   under the access-key pepper, as the platform stores keys), so they survive restarts, are seen by
 *   every replica, and end when the key is deleted or disabled, or with its User (owner
 *   reference). A refresh token is no access key (not `pak_...`): the gateway never accepts it.
 * - everything short-lived (authorization codes, interactions, sessions, grants, access tokens)
 *   is a Secret in the platform namespace (`secret-models.ts`).
 */

/** The annotation holding the refresh token's payload (oidc-provider's fields; never the token itself). */
export const REFRESH_TOKEN_PAYLOAD_ANNOTATION = 'management.platform/oidc-refresh-token';
/** The label naming (a hash of) the grant a refresh token belongs to, to revoke a grant's tokens at once. */
export const REFRESH_TOKEN_GRANT_LABEL = 'management.platform/oidc-grant';
const REFRESH_TOKEN_NAME_PREFIX = 'oidc-refresh-';

const grantLabel = (grantId: string) => createHash('sha256').update(grantId).digest('hex').slice(0, 40);

/** The OwnedAccessKey name of a refresh token with this keyed hash. */
export const refreshTokenKeyName = (tokenHash: string) => `${REFRESH_TOKEN_NAME_PREFIX}${tokenHash}`;

/**
 * The `spec.keyId` of a refresh token's key (admission wants one with every keyHash): longer than
 * any access key's public id, so no `pak_` key is ever looked up under it.
 */
export const refreshTokenKeyId = (tokenHash: string) => `oidcrefresh${tokenHash.slice(0, 32)}`;

/**
 * The OwnedAccessKey a refresh token is kept as: its keyed hash (`spec.keyHash` and the name), the
 * User it was issued for (owner and `spec.user`), the client in `spec.oidcProvider`, its lifetime as
 * `spec.ttl`, and oidc-provider's payload without the token (`jti`) in an annotation.
 */
export function refreshTokenKey(input: {
  tokenHash: string;
  payload: AdapterPayload;
  expiresInSeconds: number;
  user: { name: string; uid: string | undefined };
}): OwnedAccessKey {
  const { jti: _token, ...payload } = input.payload;
  const text = (value: unknown) => (typeof value === 'string' && value ? value : undefined);
  const clientId = text(payload.clientId);
  const nonce = text(payload.nonce);
  const scopes = text(payload.scope);
  return {
    apiVersion: GROUP_VERSION,
    kind: 'OwnedAccessKey',
    metadata: {
      name: refreshTokenKeyName(input.tokenHash),
      annotations: { [REFRESH_TOKEN_PAYLOAD_ANNOTATION]: JSON.stringify(payload) },
      ...(payload.grantId ? { labels: { [REFRESH_TOKEN_GRANT_LABEL]: grantLabel(payload.grantId) } } : {}),
      ...(input.user.uid
        ? {
            ownerReferences: [
              { apiVersion: GROUP_VERSION, kind: 'User', name: input.user.name, uid: input.user.uid },
            ],
          }
        : {}),
    },
    spec: {
      user: input.user.name,
      type: 'OIDCRefreshToken',
      keyHash: input.tokenHash,
      keyId: refreshTokenKeyId(input.tokenHash),
      displayName: `OpenID refresh token of client ${clientId ?? '(unknown)'}`,
      ttl: Math.max(1, Math.ceil(input.expiresInSeconds)),
      oidcProvider: {
        ...(clientId ? { clientId } : {}),
        ...(nonce ? { nonce } : {}),
        ...(scopes ? { scopes } : {}),
      },
    },
  };
}

/**
 * The payload oidc-provider stored for the refresh token `token`, from its key; undefined when the
 * key is disabled, holds another hash, or its payload is unreadable (the token is then refused).
 */
export function refreshTokenPayload(
  key: OwnedAccessKey,
  token: string,
  tokenHash: string,
): AdapterPayload | undefined {
  if (key.spec.disabled === true || key.spec.type !== 'OIDCRefreshToken' || key.spec.keyHash !== tokenHash)
    return undefined;
  const stored = key.metadata.annotations?.[REFRESH_TOKEN_PAYLOAD_ANNOTATION];
  if (!stored) return undefined;
  try {
    const payload: unknown = JSON.parse(stored);
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return undefined;
    return { ...(payload as AdapterPayload), jti: token };
  } catch {
    return undefined;
  }
}

/** Refresh tokens as OwnedAccessKeys (see the module comment). */
export class RefreshTokenKeys implements Adapter {
  constructor(
    private readonly api: KubeApi,
    private readonly pepper: () => Promise<Uint8Array>,
    private readonly userUid: (name: string) => Promise<string | undefined>,
  ) {}

  private async hash(token: string): Promise<string> {
    return hashAccessKey(token, await this.pepper());
  }

  private async read(name: string): Promise<OwnedAccessKey | undefined> {
    try {
      return await this.api.request<OwnedAccessKey>({
        method: 'GET',
        path: objectPath(resources.ownedAccessKeys, undefined, name),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private async delete(name: string): Promise<void> {
    try {
      await this.api.request({
        method: 'DELETE',
        path: objectPath(resources.ownedAccessKeys, undefined, name),
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
    const tokenHash = await this.hash(id);
    const name = refreshTokenKeyName(tokenHash);
    const user = String(payload.accountId ?? '');
    const key = refreshTokenKey({
      tokenHash,
      payload,
      expiresInSeconds: expiresIn,
      user: { name: user, uid: await this.userUid(user) },
    });
    const existing = await this.read(name);
    if (!existing) {
      await this.api.request({ method: 'POST', path: collectionPath(resources.ownedAccessKeys), body: key });
      return;
    }
    await this.api.request({
      method: 'PATCH',
      path: objectPath(resources.ownedAccessKeys, undefined, name),
      contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: key.metadata.annotations } },
    });
  }

  async find(id: string): Promise<AdapterPayload | undefined> {
    const tokenHash = await this.hash(id);
    const key = await this.read(refreshTokenKeyName(tokenHash));
    return key ? refreshTokenPayload(key, id, tokenHash) : undefined;
  }

  async consume(id: string): Promise<void> {
    const tokenHash = await this.hash(id);
    const name = refreshTokenKeyName(tokenHash);
    const key = await this.read(name);
    const payload = key ? refreshTokenPayload(key, id, tokenHash) : undefined;
    if (!payload) return;
    const { jti: _token, ...stored } = payload;
    await this.api.request({
      method: 'PATCH',
      path: objectPath(resources.ownedAccessKeys, undefined, name),
      contentType: 'application/merge-patch+json',
      body: {
        metadata: {
          resourceVersion: key?.metadata.resourceVersion,
          annotations: {
            [REFRESH_TOKEN_PAYLOAD_ANNOTATION]: JSON.stringify({
              ...stored,
              consumed: Math.floor(Date.now() / 1000),
            }),
          },
        },
      },
    });
  }

  async destroy(id: string): Promise<void> {
    await this.delete(refreshTokenKeyName(await this.hash(id)));
  }

  async revokeByGrantId(grantId: string): Promise<void> {
    const list = await this.api.request<{ items: OwnedAccessKey[] }>({
      method: 'GET',
      path: collectionPath(resources.ownedAccessKeys),
      query: { labelSelector: `${REFRESH_TOKEN_GRANT_LABEL}=${grantLabel(grantId)}` },
    });
    for (const key of list.items) {
      if (key.spec.type === 'OIDCRefreshToken') await this.delete(key.metadata.name ?? '');
    }
  }

  async findByUid(): Promise<undefined> {
    return undefined;
  }

  async findByUserCode(): Promise<undefined> {
    return undefined;
  }
}
