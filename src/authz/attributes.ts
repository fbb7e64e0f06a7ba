import type { ScopeRoleName } from '../api/scope.ts';

/**
 * Where a request goes once the gateway has routed it:
 *
 * - `Management`: the management API itself (`/kubernetes/management/...`).
 * - `Cluster`: a connected cluster's API (`/kubernetes/cluster/<cluster>/...`).
 * - `ProjectSpace`: a space of a project (`/kubernetes/project/<p>/space/<s>/...`).
 * - `ProjectVirtualCluster`: a project's virtual cluster (`/kubernetes/project/<p>/virtualcluster/<v>/...`).
 * - `VirtualCluster`: the legacy virtual-cluster path (`/kubernetes/virtualcluster/<namespace>/<name>/...`).
 *
 * The first four are the spelling of access-key scope rules; audit policies spell the virtual
 * cluster ones `VCluster` and `ProjectVCluster` (see `auditRequestTarget` in `../audit/policy.ts`).
 */
export type RequestTarget =
  | 'Management'
  | 'Cluster'
  | 'ProjectSpace'
  | 'ProjectVirtualCluster'
  | 'VirtualCluster';

/**
 * What the gateway knows about a request after routing it, in Kubernetes' authorizer terms plus
 * the platform's own: the inputs of scope checks and audit policies. Strings that do not apply
 * are empty, as in Kubernetes' `authorizer.Attributes`.
 */
export interface RequestAttributes {
  readonly target: RequestTarget;
  /** Kubernetes verb (`get`, `list`, `watch`, `create`, ...) or, for non-resource requests, the lowercased HTTP method. */
  readonly verb: string;
  /** True for API resource requests, false for non-resource paths (`/version`, `/apis`, ...). */
  readonly resourceRequest: boolean;
  readonly apiGroup: string;
  readonly resource: string;
  readonly subresource: string;
  readonly name: string;
  /** Empty for cluster-scoped resources. */
  readonly namespace: string;
  /** The URL path as the target API sees it (used for non-resource requests). */
  readonly path: string;
  /**
   * The connected cluster the request concerns: for the `Cluster` target the cluster it goes to;
   * for management requests about one cluster (`clusters/<c>` and its subresources) that cluster.
   * "Cluster requests" in scope rules (`cluster`) and audit rules (`clusters`) are exactly the
   * requests with target `Cluster`. Spaces and virtual clusters run on a cluster too, but requests
   * into them are not cluster requests and need not carry it.
   */
  readonly cluster?: string;
  /** The project the request concerns: its space or virtual cluster, or a management object of it. */
  readonly project?: string;
  /** The space the request concerns (with `project`). */
  readonly space?: string;
  /** The virtual cluster the request concerns: its name and the namespace it lives in. */
  readonly virtualCluster?: { readonly name: string; readonly namespace: string };
  /**
   * For platform-internal endpoints that only keys with a role may call (a virtual cluster
   * registering, a network peer): the role the endpoint needs. Absent for ordinary requests.
   */
  readonly requiredRole?: ScopeRoleName;
}

/**
 * A request on a path that is no API resource (`/version`, a cluster's root): the strings that do
 * not apply empty, as in Kubernetes' `authorizer.Attributes`; `target` `Management` unless
 * `extra` says otherwise.
 */
export function nonResourceRequest(
  verb: string,
  path: string,
  extra: Partial<RequestAttributes> = {},
): RequestAttributes {
  return {
    target: 'Management',
    verb,
    resourceRequest: false,
    apiGroup: '',
    resource: '',
    subresource: '',
    name: '',
    namespace: '',
    path,
    ...extra,
  };
}
