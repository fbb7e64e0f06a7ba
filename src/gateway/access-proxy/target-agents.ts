import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { type Connection, InvalidCredentials } from '../../clusters/connection.ts';

/**
 * How the access proxy's sockets to a target are made, from a {@link Connection} (the target's
 * credentials Secret, already reduced to inline credentials by `connectionFor`): the agent's TLS
 * options, the credential headers, and an agent whose connections fail fast when the target does
 * not answer. Pure functions apart from the agent itself; nothing here logs or quotes a credential.
 */

/**
 * How long a new socket to a target may take to connect, TLS handshake included, before it is
 * destroyed with {@link TargetConnectTimeout}: 10 s, client-go's TLS handshake timeout, well
 * inside kubectl's default request timeout, so an unreachable target is a 503, never a hang.
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/** A socket to a target that did not connect (TCP and TLS) within the connect timeout. */
export class TargetConnectTimeout extends Error {
  override readonly name = 'TargetConnectTimeout';
  readonly code = 'ETIMEDOUT';
  constructor(readonly timeoutMs: number) {
    super(`the connection was not established within ${timeoutMs / 1000} s`);
  }
}

/** Where a target's API server is, and the options of the agent that reaches it. */
export interface AgentPlan {
  readonly server: URL;
  readonly options: https.AgentOptions;
}

/**
 * The server URL and agent options of a connection: keep-alive, the CA, client certificate and
 * key (base64 PEM in the connection, decoded), the TLS server name, verification unless the
 * kubeconfig says `insecure-skip-tls-verify`. Throws {@link InvalidCredentials} (without quoting
 * the URL, which may hold a password) for a server that is not an http(s) URL or carries a user.
 */
export function agentPlan(connection: Connection): AgentPlan {
  const server = URL.canParse(connection.server) ? new URL(connection.server) : undefined;
  if (!server || (server.protocol !== 'https:' && server.protocol !== 'http:')) {
    throw new InvalidCredentials('the server is not an http or https URL');
  }
  if (server.username !== '' || server.password !== '') {
    throw new InvalidCredentials('the server URL may not hold a user name or password');
  }
  if (server.search !== '' || server.hash !== '') {
    throw new InvalidCredentials('the server URL may not have a query or fragment');
  }
  const pem = (base64: string | undefined) =>
    base64 === undefined ? undefined : Buffer.from(base64, 'base64');
  const ca = pem(connection.caData);
  const cert = pem(connection.certData);
  const key = pem(connection.keyData);
  const options: https.AgentOptions = {
    keepAlive: true,
    ...(ca ? { ca } : {}),
    ...(cert ? { cert } : {}),
    ...(key ? { key } : {}),
    ...(connection.tlsServerName ? { servername: connection.tlsServerName } : {}),
    rejectUnauthorized: connection.skipTLSVerify !== true,
  };
  return { server, options };
}

/** The platform's credential headers for a connection: a bearer token, else basic, else none (a client certificate). */
export function credentialHeaders(connection: Connection): Readonly<Record<string, string>> {
  if (connection.token) return { authorization: `Bearer ${connection.token}` };
  if (connection.username !== undefined || connection.password !== undefined) {
    const pair = `${connection.username ?? ''}:${connection.password ?? ''}`;
    return { authorization: `Basic ${Buffer.from(pair).toString('base64')}` };
  }
  return {};
}

/** A digest of everything a connection holds: equal digests, same sockets and credential. Never logged. */
export function connectionDigest(connection: Connection): string {
  const entries = Object.entries(connection).sort(([a], [b]) => a.localeCompare(b));
  return createHash('sha256').update(JSON.stringify(entries)).digest('hex');
}

/**
 * An agent for `server` (`https.Agent` for https, `http.Agent` for http) whose every new socket is
 * destroyed with {@link TargetConnectTimeout} unless it connects (TLS handshake included) within
 * `connectTimeoutMs`. Only the connection phase is timed: an idle watch is not cut.
 *
 * Its sockets share one TLS context (the CA, client certificate and key parsed once): Node makes
 * one per new socket otherwise. It is made with the first socket, so that unusable TLS material
 * fails that request, as it would without it.
 */
export function createTargetAgent(plan: AgentPlan, connectTimeoutMs: number): http.Agent {
  const secure = plan.server.protocol === 'https:';
  const agent = secure ? new https.Agent(plan.options) : new http.Agent({ keepAlive: true });
  const create = agent.createConnection.bind(agent) as typeof agent.createConnection;
  let secureContext: tls.SecureContext | undefined;
  agent.createConnection = ((options: tls.ConnectionOptions, callback: unknown) => {
    if (secure) {
      secureContext ??= tls.createSecureContext(contextOptions(plan.options));
      options.secureContext = secureContext;
    }
    const socket = (create as (o: unknown, c: unknown) => Duplex | undefined)(options, callback);
    if (socket) timeConnect(socket, secure ? 'secureConnect' : 'connect', connectTimeoutMs);
    return socket;
  }) as typeof agent.createConnection;
  return agent;
}

/** The TLS context's part of an agent's options: trust, and the client's certificate and key. */
function contextOptions(options: https.AgentOptions): tls.SecureContextOptions {
  const { ca, cert, key } = options;
  return { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}) };
}

function timeConnect(socket: Duplex, connected: string, timeoutMs: number): void {
  const timer = setTimeout(() => socket.destroy(new TargetConnectTimeout(timeoutMs)), timeoutMs);
  const stop = () => clearTimeout(timer);
  socket.once(connected, stop);
  socket.once('close', stop);
}

/**
 * Retires a replaced agent: its idle sockets close now, and each socket in use (a watch, a log
 * stream) closes when its request ends instead of going back to the pool. Open streams finish.
 */
export function retireAgent(agent: http.Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets))
    for (const socket of sockets ?? []) socket.destroy();
}
