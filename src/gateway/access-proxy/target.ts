import type http from 'node:http';
import type { RequestAttributes } from '../../authz/attributes.ts';

/**
 * The access proxy's vocabulary: where a request under `/kubernetes/cluster/...` or
 * `/kubernetes/project/...` goes (a {@link ProxyTarget}), what it is there (a {@link ProxyRoute},
 * from the path grammar in `route.ts`), and how the platform reaches that place (a
 * {@link TargetConnection}, from `targets.ts`). The relay (`relay.ts`, `upgrade.ts`) moves the
 * bytes; the gateway's pipeline authenticates, throttles, checks the scope and audits around it.
 */

/** The cluster a proxied request goes into, as its path names it. */
export type ProxyTarget =
  /** `/kubernetes/cluster/<cluster>/...`: a connected `Cluster`. */
  | { readonly kind: 'Cluster'; readonly cluster: string }
  /** `/kubernetes/project/<project>/virtualcluster/<name>/...`: a project's `VirtualClusterInstance`. */
  | { readonly kind: 'ProjectVirtualCluster'; readonly project: string; readonly virtualCluster: string }
  /** `/kubernetes/project/<project>/space/<namespace>/...`: one namespace of a project, on the host cluster. */
  | { readonly kind: 'ProjectSpace'; readonly project: string; readonly space: string };

/** A request of the access proxy once routed: where it goes, what it asks there. */
export interface ProxyRoute {
  readonly target: ProxyTarget;
  /**
   * The request's path on the target's API server, starting with `/`, exactly as the client sent
   * it after the target's prefix (percent-encoding kept); the query is the client's, untouched.
   */
  readonly upstreamPath: string;
  /** The request in Kubernetes' authorizer terms on the target (`RequestInfoFactory`), plus the target. */
  readonly attributes: RequestAttributes;
}

/**
 * How the platform reaches a target: the API server's URL, an agent holding its TLS material
 * (pooled connections), and the platform's own credential for it. The credential is never logged
 * and never appears in an answer; requests sent with it always carry the caller's impersonation.
 */
export interface TargetConnection {
  /** For messages: `cluster "prod"`, `virtual cluster "p1/vc1"`, `space "p1/p-p1"`. */
  readonly description: string;
  /** The target API server's URL; its path (a server behind a path prefix) is prepended to every request. */
  readonly server: URL;
  /** An `https.Agent` (or `http.Agent` for a plain-HTTP server) with the target's TLS material, keep-alive. */
  readonly agent: http.Agent;
  /** The platform's credential headers for the target (`authorization`), possibly empty (client certificates). */
  readonly credentials: () => Readonly<Record<string, string>>;
}
