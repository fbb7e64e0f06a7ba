import { forbidden, type StatusError } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { ACCESS_KEY_EXTRA } from '../../identity/groups.ts';
import type { HeaderMap } from './upstream.ts';

/**
 * The headers that make kube-apiserver act as the caller (`Impersonate-User`, one
 * `Impersonate-Group` per group, the access key as an extra), so that Kubernetes RBAC decides.
 * The gateway's identity needs only the `impersonate` verb on users, groups and
 * `userextras/management.platform/access-key` for this.
 */

/** Header values must be visible ASCII; an identity that is not cannot be impersonated. */
const HEADER_VALUE = /^[\x20-\x7e]*$/;

const EXTRA_HEADER = `impersonate-extra-${encodeURIComponent(ACCESS_KEY_EXTRA)}`;

/** Headers per identity object: an identity is immutable, and the caches hand out the same one per key. */
const computed = new WeakMap<AuthenticatedIdentity, HeaderMap | StatusError>();

/** The headers that make kube-apiserver act as `identity`. */
export function impersonationHeaders(identity: AuthenticatedIdentity): HeaderMap | StatusError {
  const known = computed.get(identity);
  if (known) return known;
  const values = [identity.username, ...identity.groups, identity.accessKey.name];
  const headers =
    !values.every((value) => HEADER_VALUE.test(value)) || identity.username === ''
      ? forbidden('the access key identity cannot be represented in a request to the cluster')
      : {
          'impersonate-user': identity.username,
          ...(identity.groups.length > 0 ? { 'impersonate-group': [...identity.groups] } : {}),
          [EXTRA_HEADER]: identity.accessKey.name,
        };
  computed.set(identity, headers);
  return headers;
}
