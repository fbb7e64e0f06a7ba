import type { Endpoint, EndpointAnswer, EndpointRequest } from '../../http/endpoint.ts';
import type { RequestBody } from '../body.ts';
import type { ResourceRoute } from '../paths.ts';
import type { Redaction } from '../proxy/redact.ts';
import type { UpstreamResponse } from '../proxy/upstream.ts';

/**
 * The gateway's own endpoints implement the platform's {@link Endpoint} interface, with two
 * additions only the gateway's modules need: the routed resource (for endpoints of management API
 * resources) and answers that relay an apiserver response (streamed, redacted on the way).
 */

export interface GatewayRequest extends EndpointRequest {
  /** The routed management API resource, for `resource` routes. */
  readonly resource: ResourceRoute | undefined;
  /** The body of a resource write, decoded by its verb (a patch, or an object). */
  readonly decoded: RequestBody | undefined;
  /**
   * The Accept header for a request passed on to kube-apiserver: the client's JSON flavour
   * (tables) as negotiated, plain JSON otherwise; never a format the gateway cannot read.
   */
  readonly upstreamAccept: string;
}

/** An apiserver answer passed on to the client as the proxy would (status, headers, body). */
export interface Relay {
  readonly relay: UpstreamResponse;
  /** What must be taken out of every object in it (key secrets), whatever its shape. */
  readonly redaction: Redaction | undefined;
}

export type GatewayAnswer = EndpointAnswer | Relay;

export interface GatewayEndpoint extends Omit<Endpoint, 'handle'> {
  handle(request: GatewayRequest): Promise<GatewayAnswer> | GatewayAnswer;
}

export const isRelay = (answer: GatewayAnswer): answer is Relay => 'relay' in answer;
