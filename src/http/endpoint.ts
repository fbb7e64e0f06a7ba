import type { IncomingHttpHeaders } from 'node:http';
import type { RequestAttributes } from '../authz/attributes.ts';
import type { AuthenticatedIdentity } from '../identity/authenticate.ts';

/**
 * The one interface of every HTTP endpoint the platform serves itself (as opposed to requests the
 * gateway proxies to kube-apiserver): the gateway's own resources (configs, own access keys,
 * members, kubeconfigs, direct tokens, discovery), the TokenReview webhook, public documents,
 * health, and the login pages and callbacks. The gateway's pipeline does everything around an
 * endpoint (route → authenticate → negotiate → throttle → scope → receive → audit → dispatch →
 * encode), so an endpoint only says where it is served, whether a key is needed, and how it answers.
 *
 * An endpoint is a plain object. Components outside the gateway (login) implement it here,
 * without importing the gateway, and the composition root hands them to it
 * (`setupGateway(manager, { endpoints: [...] })`); nothing in the gateway's server changes.
 *
 * Errors: throw a `StatusError` (src/api/status.ts) for a Kubernetes `Status` answer with its
 * code; anything else thrown is logged and answered 500 without details.
 */

/** Where an endpoint is served. */
export type EndpointRoute =
  /**
   * A resource of the management API
   * (`/kubernetes/management/apis/management.platform/v1/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`):
   * the request's {@link RequestAttributes} are those of the routed resource. Verbs not listed
   * are answered 405.
   */
  | {
      readonly kind: 'resource';
      readonly resource: string;
      /** Empty or absent: the resource itself (named and collection requests). */
      readonly subresource?: string;
      readonly verbs: readonly string[];
    }
  /** Non-resource paths of the management API, relative to its base (`/version`, `/apis`). */
  | { readonly kind: 'nonResource'; readonly paths: readonly string[] }
  /**
   * Absolute paths outside the management API (`/auth/password/login`, `/login`): exactly
   * `path`, or with `prefix` also every path below `path/`. Methods not listed are answered 405.
   */
  | {
      readonly kind: 'path';
      readonly path: string;
      readonly prefix?: boolean;
      readonly methods: readonly string[];
      /**
       * The attributes audit, metrics and scope see for these requests; by default a
       * non-resource request on the path (verb: the lower-cased method).
       */
      readonly attributes?: (method: string, path: string) => RequestAttributes;
    };

/**
 * Who may call it:
 * - `key`: a valid platform access key (`Authorization: Bearer`); 401, or 429 after repeated
 *   failures, otherwise. The request carries the caller's {@link AuthenticatedIdentity}.
 * - `none`: no key is read (public documents, login pages and callbacks, health). Such an
 *   endpoint that checks credentials of its own (an OAuth client's secret) declares
 *   `checksCredentials` and counts its failures through {@link EndpointRequest.credentialFailures},
 *   so that the same throttling applies.
 */
export type EndpointAuthentication = 'key' | 'none';

/**
 * How the caller key's scope applies (endpoints with `authentication: 'key'`):
 * - `request` (the default): the pipeline checks the scope against the routed attributes (403);
 * - `handler`: the endpoint checks it itself (what a request concerns is only known from its
 *   body, as for direct tokens);
 * - `any`: every key may call it, whatever its scope (discovery: kubectl cannot work without).
 */
export type EndpointScope = 'request' | 'handler' | 'any';

export interface Endpoint {
  /** For logs (`endpoint=<name>`). */
  readonly name: string;
  readonly route: EndpointRoute;
  /** A function when it depends on the configuration (`authenticateVersionEndpoint`). */
  readonly authentication: EndpointAuthentication | (() => EndpointAuthentication);
  readonly scope?: EndpointScope;
  /**
   * Requests and answers of this endpoint hold credentials (keys, tokens, kubeconfigs, the
   * platform config): audit events never carry their bodies, whatever the policy.
   */
  readonly sensitive?: boolean;
  /**
   * Headers every answer on this endpoint's path carries (`path` routes), the pipeline's own
   * refusals included (401, 403, 405, 429, ...), read per request: the login's
   * `auth.customHttpHeaders`. An answer's own headers take precedence.
   */
  readonly answerHeaders?: () => EndpointHeaders;
  /**
   * Media types this endpoint answers in itself, besides JSON and YAML (the OpenAPI v2 document
   * as protobuf): a request accepting only one of them is the endpoint's to answer, not a 406.
   * Errors are still JSON.
   */
  readonly produces?: readonly string[];
  /**
   * Checks credentials of its own (an OAuth client's secret) and counts the failures with the
   * platform's one failure limiter: its requests carry {@link EndpointRequest.credentialFailures}.
   */
  readonly checksCredentials?: boolean;
  handle(request: EndpointRequest): Promise<EndpointAnswer> | EndpointAnswer;
}

export interface EndpointRequest {
  /** `GET`, `POST`, ... (`HEAD` is served as `GET` without a body). */
  readonly method: string;
  /** The absolute request path, as sent (not percent-decoded). */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Request headers, names in lower case. */
  readonly headers: IncomingHttpHeaders;
  /**
   * The client's address: the peer, or what `X-Forwarded-For` says when the peer is one of the
   * gateway's trusted proxies (`--trusted-proxies`).
   */
  readonly source: string;
  /**
   * Whether the client reached the platform over HTTPS: the gateway serves TLS, or a trusted
   * proxy says so (`X-Forwarded-Proto: https`). Cookies of an HTTPS client are `Secure`.
   */
  readonly secure: boolean;
  /** What the request is, in Kubernetes' authorizer terms (audit, metrics and scope use these). */
  readonly attributes: RequestAttributes;
  /** The caller: set for endpoints with `authentication: 'key'`. */
  readonly identity: AuthenticatedIdentity | undefined;
  /** The request body (empty when there is none); at most 3 MiB, larger requests never get here. */
  readonly body: Uint8Array;
  /**
   * The body as a JSON or YAML object, by its Content-Type (JSON without one); throws a
   * `StatusError` (400, 415) when it is not one.
   */
  object(): Record<string, unknown>;
  /** Aborted when the client goes away. */
  readonly signal: AbortSignal;
  /**
   * The failure limiter for the endpoint's own credential checks, against this request's source:
   * set for endpoints that declare `checksCredentials`, undefined for every other.
   */
  readonly credentialFailures: CredentialFailures | undefined;
}

/** An endpoint's own credential checks against the request's source and a `subject` (a user or client name). */
export interface CredentialFailures {
  /**
   * Counts a failed check: resolves to the seconds to wait when this failure crossed a limit
   * (answer 429 with Retry-After then), undefined otherwise.
   */
  failed(subject: string | undefined): Promise<number | undefined>;
  /**
   * Seconds the source or `subject` must still wait after earlier failures (check before the
   * credential itself, answer 429 when set), undefined when neither is blocked.
   */
  blockedFor(subject: string | undefined): Promise<number | undefined>;
}

export type EndpointHeaders = Readonly<Record<string, string | readonly string[]>>;

/** What every answer may carry besides its body. */
interface AnswerCommon {
  readonly code: number;
  readonly headers?: EndpointHeaders;
  /** Added to the request's audit event (`authentication.platform/...`); never secrets. */
  readonly auditAnnotations?: Readonly<Record<string, string>>;
}

/** How an endpoint answers. */
export type EndpointAnswer =
  /** An object, encoded as the client accepts it (JSON, or YAML when asked). */
  | (AnswerCommon & { readonly object: unknown })
  /** Bytes as they are (an HTML page, a redirect, a document of its own format). */
  | (AnswerCommon & { readonly body: string | Uint8Array; readonly contentType: string });

/** Whether the route serves `method` (`HEAD` counts as `GET`). */
export function routeAllows(methodsOrVerbs: readonly string[], value: string): boolean {
  return methodsOrVerbs.includes(value) || (value === 'HEAD' && methodsOrVerbs.includes('GET'));
}
