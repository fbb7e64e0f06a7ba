import type { RequestAttributes } from '../../authz/attributes.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { ReviewedAttributes } from '../proxy/sar.ts';
import type { HeaderMap, Upstream } from '../proxy/upstream.ts';

/**
 * The extension point for virtual endpoints of later issues: `directclusterendpointtokens`
 * (POST) and `virtualclusterinstances/<name>/kubeconfig` (POST). A handler receives the
 * authenticated, scope-checked request with its decoded body and answers with a status code and
 * an object; the gateway does routing, authentication, scope, audit (these requests are never
 * logged beyond `Metadata`), encoding and metrics. An endpoint without a handler is not served
 * (404) and is left out of discovery.
 */

export interface VirtualRequest {
  readonly identity: AuthenticatedIdentity;
  readonly attributes: RequestAttributes;
  /** The decoded request object (POST bodies), if any. */
  readonly body: Record<string, unknown> | undefined;
  readonly query: URLSearchParams;
  /** The apiserver, as the operator. */
  readonly upstream: Upstream;
  /** Headers that make an upstream call run as the caller (RBAC decides). */
  readonly impersonation: HeaderMap;
  readonly signal: AbortSignal;
  /** Whether Kubernetes RBAC allows the caller this (a SubjectAccessReview). */
  authorize(attributes: ReviewedAttributes): Promise<boolean>;
  /** The Project whose namespace `namespace` is, if any. */
  projectOfNamespace(namespace: string): string | undefined;
  /**
   * Creates an access key owned by the caller from an `OwnedAccessKey` body (the key is
   * generated), as the operator; throws a StatusError when it cannot be created.
   */
  issueKey(body: Record<string, unknown>): Promise<IssuedKey>;
}

export interface IssuedKey {
  /** The created object, without its secret. */
  readonly object: Record<string, unknown>;
  /** The plaintext key: goes to the caller only, never stored or logged. */
  readonly plaintext: string;
}

export interface VirtualResponse {
  readonly code: number;
  readonly body: unknown;
}

export type VirtualHandler = (request: VirtualRequest) => Promise<VirtualResponse>;

/** Handlers by resource path: `directclusterendpointtokens`, `virtualclusterinstances/kubeconfig`. */
export interface VirtualEndpoints {
  readonly directclusterendpointtokens?: VirtualHandler;
  readonly 'virtualclusterinstances/kubeconfig'?: VirtualHandler;
}

export type VirtualEndpointName = keyof VirtualEndpoints;

/**
 * Endpoints whose handler checks the key scope itself, instead of the gateway's request check:
 * minting a direct token concerns the clusters the token will name, which only the body says;
 * the handler allows a token only within the key's scope (a cluster-scoped key may mint tokens
 * for its clusters, never wider).
 */
export const SCOPE_CHECKED_BY_HANDLER: ReadonlySet<VirtualEndpointName> = new Set([
  'directclusterendpointtokens',
]);

/** Which extension endpoint a resource request is, if any. */
export function extensionEndpoint(attributes: RequestAttributes): VirtualEndpointName | undefined {
  if (attributes.resource === 'directclusterendpointtokens' && attributes.subresource === '')
    return 'directclusterendpointtokens';
  if (attributes.resource === 'virtualclusterinstances' && attributes.subresource === 'kubeconfig')
    return 'virtualclusterinstances/kubeconfig';
  return undefined;
}
