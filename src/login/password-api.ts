import { API_GROUP, API_VERSION } from '../api/meta.ts';
import {
  reviewAllowed,
  SUBJECT_ACCESS_REVIEWS_PATH,
  subjectAccessReview,
} from '../authz/subject-access-review.ts';
import type { AuthenticatedIdentity } from '../identity/authenticate.ts';
import { keyUserInfo } from '../identity/user-info.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { LoginRefused } from './identity.ts';
import type { LoginService } from './service.ts';

/**
 * Setting passwords through the API (`POST /auth/users/<user>/password`, served by the gateway
 * with the caller's key):
 *
 * - `{password}`: someone sets `<user>`'s password. Allowed when Kubernetes RBAC lets the caller
 *   `update` the `users/password` subresource of that User (group `management.platform`), asked by
 *   a SubjectAccessReview for the caller exactly as the gateway impersonates it (user, groups,
 *   uid, the access key as an extra): platform admins may, and an admin can grant it for chosen
 *   users by a Role. The user's Login keys end (its sessions), automation keys stay.
 * - `{oldPassword, password}`: a user changes its own password (the caller's key is its own, the
 *   path names it): the old password is checked as a sign-in is (throttled, counted) and no RBAC
 *   permission is needed.
 */

export class PasswordChangeForbidden extends LoginRefused {
  override readonly name = 'PasswordChangeForbidden';
  override readonly code = 403;
}

export interface PasswordRequest {
  readonly password?: unknown;
  readonly oldPassword?: unknown;
}

export class PasswordApi {
  constructor(private readonly deps: { readonly service: LoginService; readonly api: KubeApi }) {}

  /** Whether RBAC lets `caller` update `users/password` of `user`. */
  async mayUpdate(caller: AuthenticatedIdentity, user: string): Promise<boolean> {
    const review = await this.deps.api.request<{ status?: { allowed?: boolean } }>({
      method: 'POST',
      path: SUBJECT_ACCESS_REVIEWS_PATH,
      body: subjectAccessReview(keyUserInfo(caller), {
        group: API_GROUP,
        version: API_VERSION,
        resource: 'users',
        subresource: 'password',
        name: user,
        verb: 'update',
      }),
    });
    return reviewAllowed(review);
  }

  async setPassword(
    caller: AuthenticatedIdentity,
    user: string,
    request: PasswordRequest,
    source: string,
  ): Promise<void> {
    const password = typeof request.password === 'string' ? request.password : '';
    if (request.oldPassword !== undefined) {
      if (caller.kind !== 'User' || caller.name !== user)
        throw new PasswordChangeForbidden('the old password changes only your own password');
      await this.deps.service.changePassword({
        username: user,
        oldPassword: typeof request.oldPassword === 'string' ? request.oldPassword : '',
        newPassword: password,
        source,
      });
      return;
    }
    if (!(await this.mayUpdate(caller, user)))
      throw new PasswordChangeForbidden(
        `you may not set the password of user "${user}" (RBAC: update users/password); to change your own, send oldPassword too`,
      );
    await this.deps.service.setPassword(user, password);
  }
}
