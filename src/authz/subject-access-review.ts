/**
 * The one SubjectAccessReview the platform asks the apiserver (`authorization.k8s.io/v1`): whether
 * Kubernetes RBAC allows a user, as the apiserver knows them, an action on a resource.
 */

/** A user as Kubernetes knows them (`authentication.k8s.io/v1` UserInfo). */
export interface KubernetesUserInfo {
  readonly username?: string;
  readonly uid?: string;
  readonly groups?: readonly string[];
  readonly extra?: Readonly<Record<string, readonly string[]>>;
}

/** What is asked about (`spec.resourceAttributes`); absent fields mean "any" as RBAC reads them. */
interface ReviewedResourceAttributes {
  readonly group?: string;
  readonly version?: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly verb?: string;
}

export const SUBJECT_ACCESS_REVIEWS_PATH = '/apis/authorization.k8s.io/v1/subjectaccessreviews';

/**
 * The SubjectAccessReview asking whether `user` may act on `resourceAttributes`. Unset username,
 * uid and extra are left out; groups are always sent (none: an empty list).
 */
export function subjectAccessReview(
  user: KubernetesUserInfo,
  resourceAttributes: ReviewedResourceAttributes,
) {
  return {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      ...(user.username !== undefined ? { user: user.username } : {}),
      ...(user.uid !== undefined ? { uid: user.uid } : {}),
      groups: [...(user.groups ?? [])],
      ...(user.extra ? { extra: user.extra } : {}),
      resourceAttributes,
    },
  };
}

/** The verdict of a SubjectAccessReview's answer: allowed only when the apiserver says so. */
export const reviewAllowed = (answer: { status?: { allowed?: boolean } } | undefined): boolean =>
  answer?.status?.allowed === true;
