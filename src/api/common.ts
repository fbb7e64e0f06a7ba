import { z } from 'zod';

/** Owner of an object: a user or a team (the established product's `UserOrTeam`). */
export const OwnerSchema = z
  .object({
    user: z.string().optional().describe('Name of the owning user.'),
    team: z.string().optional().describe('Name of the owning team.'),
  })
  .describe('Owner of the object: a user or a team.');

/** A platform-wide or cluster role held by a user or team. */
export const ClusterRoleRefSchema = z.object({
  name: z.string().min(1).describe('Name of the cluster role; `platform-admin` marks a platform-wide admin.'),
});

/** Name of the cluster role that makes a user or team a platform-wide admin. */
export const PLATFORM_ADMIN_CLUSTER_ROLE = 'platform-admin';

/** Standard base64 (RFC 4648 section 4 alphabet, padded), as the apiserver checks it. */
export const BASE64_PATTERN = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Base64 text of arbitrary bytes, checked by pattern only: the apiserver's `format: byte` refuses
 * the empty string, which is a legitimate (empty) value.
 */
export const base64Schema = () => z.string().regex(BASE64_PATTERN, 'must be base64 text');

/** An absolute `https://` or `http://` URL. */
export const HTTP_URL_PATTERN = /^https?:\/\/[^\s/?#]+([/?#]\S*)?$/;

/** A reference to a Secret by namespace and name (for cluster-scoped owners). */
export const SecretReferenceSchema = z
  .object({
    namespace: z.string().min(1).describe('Namespace of the Secret.'),
    name: z.string().min(1).describe('Name of the Secret.'),
  })
  .describe('A Secret in a given namespace.');

/**
 * A reference to a Secret in the referring object's own namespace. Namespaced kinds may only
 * point into their own namespace, so that creating one never lends out another namespace's Secret.
 */
export const LocalSecretReferenceSchema = z
  .object({ name: z.string().min(1).describe("Name of the Secret in the object's namespace.") })
  .describe("A Secret in the object's own namespace.");

/**
 * CEL rule (on the enclosing object) keeping `field` unchanged once it has been set: it may go
 * from unset to set, never change or be removed afterwards. Reported at the field's path.
 */
export function immutableOnceSet(field: string, reason: string) {
  return {
    rule: `!has(oldSelf.${field}) || (has(self.${field}) && self.${field} == oldSelf.${field})`,
    message: `${field} cannot be changed once set: ${reason}`,
    fieldPath: `.${field}`,
    reason: 'FieldValueInvalid',
  };
}
