import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { forbidden, StatusError, sanitize } from '../../api/status.ts';
import type { AuthenticatedIdentity } from '../../identity/authenticate.ts';
import { impersonationHeaders } from '../proxy/impersonation.ts';
import {
  isImpersonationHeader,
  openUpstream,
  type RelayOptions,
  refusedCredentials,
  relayAnswer,
} from './relay.ts';
import type { ProxyRoute, ProxyTarget, TargetConnection } from './target.ts';
import { joinUpgraded } from './upgrade.ts';

/**
 * The access proxy as the gateway's pipeline calls it, once the request is routed (`route.ts`),
 * authenticated, checked against the key's scope and holding its slot: the caller's identity
 * impersonated on the target, reached with the platform's credential for it (`targets.ts`), the
 * bytes relayed (`relay.ts`, `upgrade.ts`).
 */

/** Where targets are reached (`ProxyTargets` of `targets.ts`). */
export interface TargetResolver {
  /** The connection to a target; a `Status` error (404 unknown, 503 unusable) when there is none. */
  resolve(target: ProxyTarget, signal?: AbortSignal): Promise<TargetConnection>;
  /** Forgets a target's connection (the target refused the platform's credential: read it again). */
  invalidate(target: ProxyTarget): void;
}

/** Sleep mode (`wake.ts`): an asleep virtual cluster is woken and waited for; an awake one's activity recorded. */
export interface TargetWaker {
  /** Returns once the target may be relayed to; throws a `Status` error (503) when it did not wake in time. */
  ready(
    target: ProxyTarget,
    caller: AuthenticatedIdentity,
    search: string,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface AccessProxyDeps {
  readonly targets: TargetResolver;
  readonly relay?: RelayOptions;
  /** Absent: targets are relayed to as they are (no sleep mode). */
  readonly waker?: TargetWaker;
}

/** An upgrade request's connection, as the server's `upgrade` event hands it over. */
export interface UpgradeConnection {
  readonly socket: Duplex;
  /** Bytes the client sent after its request's head. */
  readonly head: Buffer;
}

/**
 * A proxied request carrying impersonation headers of its own: refused (403) naming them. The
 * caller is who its key says; its headers are never forwarded nor merged with the platform's.
 */
export function callerImpersonationRefusal(rawHeaders: readonly string[]): StatusError | undefined {
  const names = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (isImpersonationHeader(name)) names.add(name.toLowerCase());
  }
  if (names.size === 0) return undefined;
  const listed = [...names].map((name) => sanitize(name, 64)).join(', ');
  return forbidden(
    `impersonation headers are not allowed through the access proxy (${listed}): requests are made as the key's owner`,
  );
}

/** One proxied request, as the pipeline hands it over. */
export interface ForwardRequest {
  readonly route: ProxyRoute;
  readonly identity: AuthenticatedIdentity;
  readonly request: IncomingMessage;
  /** The client's response (for an upgrade request, bound to its connection). */
  readonly response: ServerResponse;
  readonly search: string;
  readonly signal: AbortSignal;
  readonly longLived: boolean;
  /** Present for an upgrade request. */
  readonly upgrade?: UpgradeConnection;
  /** Called once the answer's status is known and its headers go to the client. */
  readonly answering?: (code: number) => void;
}

/**
 * Relays one request to its target and the answer back (an asleep virtual cluster woken and
 * waited for first, at most the client's timeout: `wake.ts`); resolves with the answer's status once
 * the answer (or the upgraded connection) ended. Throws a `Status` error when no answer came (the
 * pipeline encodes it): the target unknown, unusable, unreachable, slow, or refusing the
 * platform's credential (503, and the connection is read again for the next request).
 */
export async function forward(deps: AccessProxyDeps, input: ForwardRequest): Promise<number> {
  const { route, upgrade } = input;
  const impersonation = impersonationHeaders(input.identity);
  if (impersonation instanceof StatusError) throw impersonation;
  // The pipeline authenticated the request and its key's scope allowed it: only such a request wakes.
  await deps.waker?.ready(route.target, input.identity, input.search, input.signal);
  const connection = await deps.targets.resolve(route.target, input.signal);
  const relay = {
    request: input.request,
    upstreamPath: route.upstreamPath,
    search: input.search,
    impersonation,
    signal: input.signal,
    longLived: input.longLived,
  };
  const answer = await openUpstream(connection, relay, { ...deps.relay, upgrade: upgrade !== undefined });
  const code = answer.response.statusCode ?? 502;
  if (code === 401) {
    if (answer.kind === 'upgrade') answer.socket.destroy();
    else answer.response.resume();
    deps.targets.invalidate(route.target);
    throw refusedCredentials(connection.description);
  }
  input.answering?.(code);
  if (answer.kind === 'upgrade') {
    if (!upgrade)
      throw new StatusError(502, 'BadGateway', `${connection.description} switched protocols unasked`);
    input.response.detachSocket(upgrade.socket as Socket);
    await joinUpgraded(answer.response, {
      client: upgrade.socket,
      clientHead: upgrade.head,
      upstream: answer.socket,
      upstreamHead: answer.head,
    });
    return code;
  }
  await relayAnswer(answer.response, input.response, input.longLived);
  return code;
}
