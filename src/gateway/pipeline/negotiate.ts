import { notAcceptable, StatusError } from '../../api/status.ts';
import { mediaType, type Negotiated, negotiate } from '../body.ts';
import type { Exchange } from './exchange.ts';
import type { Routed } from './route.ts';

/**
 * The negotiate stage: the format a request is answered in (JSON, YAML, a JSON flavour such as
 * tables passed upstream), from its Accept header, once it is routed; refusals are 406. Until it
 * has run a request is answered in JSON.
 */

/**
 * Content negotiation per distinct Accept header: clients send a handful of spellings over and
 * over, so each is parsed once (at most `max` kept; the cache starts over when full). Refusals
 * (406) are not kept: each is a fresh error.
 */
export class NegotiationCache {
  private readonly known = new Map<string, Negotiated>();

  constructor(private readonly max = 256) {}

  /** The answer format for `accept`, or the 406 refusal. */
  negotiate(accept: string | undefined): Negotiated | StatusError {
    const key = accept ?? '';
    const cached = this.known.get(key);
    if (cached) return cached;
    const negotiated = negotiate(accept);
    if (!(negotiated instanceof StatusError)) {
      if (this.known.size >= this.max) this.known.clear();
      this.known.set(key, negotiated);
    }
    return negotiated;
  }

  get size(): number {
    return this.known.size;
  }
}

/** Verbs answered with one object (or a Status), never a list. */
const OBJECT_VERBS = new Set(['get', 'create', 'update', 'patch', 'delete']);

/**
 * A request answered with one object that asks for it first as a list of metadata
 * (`as=PartialObjectMetadataList`): kube-apiserver refuses that with 406 for its own kinds, and
 * fails with a 500 ("content is not a list") for custom resources. The gateway answers 406 for
 * every resource, as kube-apiserver does for its own.
 */
export function objectAsListRefusal(
  negotiated: Negotiated,
  verb: string | undefined,
): StatusError | undefined {
  if (verb === undefined || !OBJECT_VERBS.has(verb) || !asListFirst(negotiated)) return undefined;
  return notAcceptable('you requested PartialObjectMetadataList, but the requested object is not a list');
}

/** Whether a negotiation asks for a list of metadata first (one object per Accept header, cached). */
const AS_LIST_FIRST = new WeakMap<Negotiated, boolean>();

function asListFirst(negotiated: Negotiated): boolean {
  const known = AS_LIST_FIRST.get(negotiated);
  if (known !== undefined) return known;
  const first = negotiated.upstreamAccept.split(',')[0] ?? '';
  const asList = first
    .split(';')
    .slice(1)
    .some((parameter) => parameter.trim().toLowerCase() === 'as=partialobjectmetadatalist');
  AS_LIST_FIRST.set(negotiated, asList);
  return asList;
}

/** Whether the routed endpoint answers one of the accepted media types itself (`produces`). */
function answersItself(exchange: Exchange, routed: Routed): boolean {
  const produces = routed.kind === 'endpoint' ? routed.endpoint.produces : undefined;
  if (!produces || produces.length === 0) return false;
  const accept = exchange.request.headers.accept ?? '';
  return accept.split(',').some((entry) => produces.includes(mediaType(entry)));
}

/**
 * The exchange's answer format, from its Accept header (throws 406); a request for a media type
 * its endpoint answers itself gets JSON for everything else (its errors).
 */
export function negotiateExchange(cache: NegotiationCache, exchange: Exchange, routed: Routed): Negotiated {
  let negotiated = cache.negotiate(exchange.request.headers.accept);
  if (negotiated instanceof StatusError && answersItself(exchange, routed))
    negotiated = cache.negotiate(undefined);
  if (negotiated instanceof StatusError) throw negotiated;
  const attributes = routed.attributes;
  const refusal = attributes.resourceRequest ? objectAsListRefusal(negotiated, attributes.verb) : undefined;
  if (refusal) throw refusal;
  return negotiated;
}
