import { forbidden, type StatusError } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import { checkScope } from '../../authz/scope.ts';
import type { EndpointScope } from '../../http/endpoint.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import type { Routed } from './route.ts';

/**
 * The scope stage: the key's scope narrows what RBAC may then allow (403 with the reason). The
 * endpoint says how its requests are judged ({@link EndpointScope}); proxied requests always by
 * their attributes.
 */
export function scopeRefusal(
  identity: AuthenticatedIdentity,
  attributes: RequestAttributes,
  how: EndpointScope = 'request',
): StatusError | undefined {
  if (how !== 'request') return undefined;
  const decision = checkScope(identity.accessKey.scope, attributes);
  return decision.allowed ? undefined : forbidden(`${describe(attributes, identity)}: ${decision.reason}`);
}

/** The scope stage for a routed request: throws the refusal (none when no key was read). */
export function checkRoutedScope(identity: AuthenticatedIdentity | undefined, routed: Routed): void {
  if (identity === undefined) return;
  const how = routed.kind === 'endpoint' ? routed.endpoint.scope : undefined;
  const refusal = scopeRefusal(identity, routed.attributes, how);
  if (refusal) throw refusal;
}

function describe(attributes: RequestAttributes, identity: AuthenticatedIdentity): string {
  const what = attributes.resourceRequest
    ? `${attributes.resource}${attributes.subresource ? `/${attributes.subresource}` : ''}.${attributes.apiGroup}${attributes.name ? ` "${attributes.name}"` : ''}`
    : attributes.path;
  return `${what} is forbidden for User "${identity.username}"`;
}
