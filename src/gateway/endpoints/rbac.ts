import { forbidden, type StatusError } from '../../api/status.ts';
import type { RequestAttributes } from '../../authz/attributes.ts';

/** 403 in kube-apiserver's words, for a management resource RBAC did not allow. */
export function rbacForbidden(username: string, attributes: RequestAttributes): StatusError {
  const resource = attributes.subresource
    ? `${attributes.resource}/${attributes.subresource}`
    : attributes.resource;
  const where = attributes.namespace ? `in the namespace "${attributes.namespace}"` : 'at the cluster scope';
  return forbidden(
    `${resource}.management.platform${attributes.name ? ` "${attributes.name}"` : ''} is forbidden: User "${username}" cannot ${attributes.verb} resource "${resource}" in API group "management.platform" ${where}`,
    {
      group: 'management.platform',
      kind: attributes.resource,
      ...(attributes.name ? { name: attributes.name } : {}),
    },
  );
}
