/**
 * The Kubernetes identity a platform identity acts as (DESIGN.md "Identity"): the group names the
 * gateway impersonates, the TokenReview webhook answers with, and projected RoleBindings name as
 * subjects. One definition, so RBAC works the same on every path.
 */

/** Every authenticated platform identity. */
export const GROUP_AUTHENTICATED = 'platform:authenticated';
/** Platform admins: users and teams holding the cluster role `platform-admin`. */
export const GROUP_ADMINS = 'platform:admins';
/** The group of one platform user. */
export const userGroup = (user: string) => `platform:user:${user}`;
/** The group of one platform team (its members and its own keys). */
export const teamGroup = (team: string) => `platform:team:${team}`;
/** The username a team key acts as (cannot collide with a user: object names have no `:`). */
export const teamUsername = (team: string) => `platform:team:${team}`;

/**
 * The extra (`user.extra`) naming the access key a request was made with: the gateway
 * impersonates with it, the TokenReview webhook answers with it, and SubjectAccessReviews ask
 * for the caller with it, so RBAC and audit logs see the key on every path.
 */
export const ACCESS_KEY_EXTRA = 'management.platform/access-key';

/** Prefixes no key may claim in its username or extra groups: Kubernetes' and the platform's own. */
const RESERVED_NAME_PREFIXES = ['system:', 'platform:'] as const;
export const isReservedName = (name: string) =>
  RESERVED_NAME_PREFIXES.some((prefix) => name.startsWith(prefix));
