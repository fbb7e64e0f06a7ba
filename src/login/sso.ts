import type { SsoIdentity } from '../api/ownedaccesskey.ts';
import type { ExternalIdentity } from './identity.ts';

/**
 * What every single-sign-on connector offers the login endpoints and the identity refresh:
 * starting a sign-in (a redirect to the provider, or a form of the platform's own), finishing it
 * at the callback with the identity the provider vouched for, and, where the provider supports
 * it, refreshing a key's identity later from what it kept in `identity.connectorData`.
 */

/** How a sign-in starts: the browser is sent to the provider, or shown one of the platform's forms. */
export type SsoStart =
  | { readonly redirect: URL; readonly transaction: unknown }
  | { readonly form: 'access-key'; readonly transaction: unknown };

/** What the callback brought: the URL (OAuth query) and the posted form (SAML, key forms). */
export interface SsoCallback {
  readonly url: URL;
  readonly form: URLSearchParams;
  /** The client address (for throttling guesses). */
  readonly source: string;
}

export interface SsoConnector {
  readonly id: string;
  start(): Promise<SsoStart>;
  /** The identity of a completed sign-in, for the transaction `start` returned. */
  finish(callback: SsoCallback, transaction: unknown): Promise<ExternalIdentity>;
  /**
   * The identity as the provider states it now, for a key signed in earlier (its stored identity,
   * connectorData included). {@link RefreshRevoked} when the provider no longer vouches for it;
   * other errors are transient. Absent when the provider offers no way to ask again.
   */
  refresh?(identity: SsoIdentity): Promise<ExternalIdentity>;
}

/**
 * The JSON kept in `connectorData` by the connectors: what they need to ask the provider again,
 * and the OpenID connector's last ID token (the `id_token_hint` of its end-session request).
 */
export interface ConnectorData {
  readonly refreshToken?: string;
  readonly accessToken?: string;
  readonly idToken?: string;
}

export function readConnectorData(identity: Pick<SsoIdentity, 'connectorData'>): ConnectorData {
  if (!identity.connectorData) return {};
  try {
    const parsed: unknown = JSON.parse(identity.connectorData);
    if (typeof parsed !== 'object' || parsed === null) return {};
    const { refreshToken, accessToken, idToken } = parsed as Record<string, unknown>;
    return {
      ...(typeof refreshToken === 'string' ? { refreshToken } : {}),
      ...(typeof accessToken === 'string' ? { accessToken } : {}),
      ...(typeof idToken === 'string' ? { idToken } : {}),
    };
  } catch {
    return {};
  }
}

export const connectorDataOf = (data: ConnectorData): string | undefined =>
  data.refreshToken || data.accessToken || data.idToken ? JSON.stringify(data) : undefined;
