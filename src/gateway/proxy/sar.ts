import { API_GROUP, API_VERSION } from '../../api/meta.ts';
import { serviceUnavailable } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';
import {
  reviewAllowed,
  SUBJECT_ACCESS_REVIEWS_PATH,
  subjectAccessReview,
} from '../../authz/subject-access-review.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { keyUserInfo } from '../../identity/user-info.ts';
import { type Upstream, upstreamFailure } from './upstream.ts';

/** The attributes of a management resource a SubjectAccessReview asks about. */
export type ReviewedAttributes = Pick<
  RequestAttributes,
  'verb' | 'resource' | 'subresource' | 'name' | 'namespace'
>;

/**
 * Whether Kubernetes RBAC allows `identity` (user, groups, uid and the access-key extra, exactly
 * as the gateway impersonates it) the management request: one SubjectAccessReview as the
 * operator. For the gateway's own endpoints that have no apiserver resource behind them
 * (configs, kubeconfigs, other owners' key lists).
 */
export async function subjectAccessAllowed(
  upstream: Upstream,
  identity: AuthenticatedIdentity,
  attributes: ReviewedAttributes,
  signal: AbortSignal,
): Promise<boolean> {
  const answer = await upstream
    .json<{ status?: { allowed?: boolean } }>({
      method: 'POST',
      path: SUBJECT_ACCESS_REVIEWS_PATH,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(
        subjectAccessReview(keyUserInfo(identity), {
          group: API_GROUP,
          version: API_VERSION,
          resource: attributes.resource,
          ...(attributes.subresource ? { subresource: attributes.subresource } : {}),
          ...(attributes.name ? { name: attributes.name } : {}),
          ...(attributes.namespace ? { namespace: attributes.namespace } : {}),
          verb: attributes.verb,
        }),
      ),
      signal,
    })
    .catch((error: unknown) => {
      throw upstreamFailure(error, signal);
    });
  if (answer.statusCode !== 201 && answer.statusCode !== 200) {
    throw serviceUnavailable('the authorization check could not be made');
  }
  return reviewAllowed(answer.body);
}
