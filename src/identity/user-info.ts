import type { KubernetesUserInfo } from '../authz/subject-access-review.ts';
import type { AuthenticatedIdentity } from './authenticate.ts';
import { ACCESS_KEY_EXTRA } from './groups.ts';

/**
 * An access key's identity as Kubernetes sees it: the username, uid (when there is one) and
 * groups the gateway impersonates, and the key's name as the access-key extra. RBAC is asked
 * about, and the audit records, exactly this user.
 */
export function keyUserInfo(
  identity: AuthenticatedIdentity,
): KubernetesUserInfo & { readonly username: string } {
  return {
    username: identity.username,
    ...(identity.uid ? { uid: identity.uid } : {}),
    groups: identity.groups,
    extra: { [ACCESS_KEY_EXTRA]: [identity.accessKey.name] },
  };
}
