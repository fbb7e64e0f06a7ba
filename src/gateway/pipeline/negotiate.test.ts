import { describe, expect, test } from 'vitest';
import { keysRequest, testExchange } from '../../../test-support/gateway-exchange.ts';
import { StatusError } from '../../api/status.ts';
import { nonResourceRequest, type RequestAttributes } from '../../authz/attributes.ts';
import { NegotiationCache, negotiateExchange, objectAsListRefusal } from './negotiate.ts';
import type { Routed } from './route.ts';

/** A request routed to an endpoint (answering `produces` itself) with `attributes`. */
const routedTo = (attributes: RequestAttributes, produces?: readonly string[]): Routed => ({
  kind: 'endpoint',
  endpoint: {
    name: 'e',
    route: { kind: 'path', path: '/x', methods: ['GET'] },
    authentication: 'key',
    ...(produces ? { produces } : {}),
    handle: () => ({ code: 200, object: {} }),
  },
  attributes,
  resource: undefined,
});

describe('content negotiation', () => {
  test('each Accept header is negotiated once; the cache starts over when full', () => {
    const cache = new NegotiationCache(2);
    const yaml = cache.negotiate('application/yaml');
    expect(yaml).toEqual({ format: 'yaml', upstreamAccept: 'application/json' });
    expect(cache.negotiate('application/yaml')).toBe(yaml);
    expect(cache.negotiate(undefined)).toBe(cache.negotiate(''));
    expect(cache.size).toBe(2);
    cache.negotiate('*/*');
    expect(cache.size).toBe(1);
    expect(cache.negotiate('application/yaml')).not.toBe(yaml);
  });

  test('refusals are not kept: each 406 is a fresh error', () => {
    const cache = new NegotiationCache();
    const first = cache.negotiate('text/html');
    expect(first).toBeInstanceOf(StatusError);
    expect((first as StatusError).code).toBe(406);
    expect(cache.negotiate('text/html')).not.toBe(first);
    expect(cache.size).toBe(0);
  });

  test("the exchange is answered in the negotiated format, or refused; a table request's JSON flavour goes upstream", () => {
    const cache = new NegotiationCache();
    const table = testExchange({ headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } });
    expect(negotiateExchange(cache, table, routedTo(nonResourceRequest('get', '/x')))).toEqual({
      format: 'json',
      upstreamAccept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json',
    });
    const html = testExchange({ headers: { accept: 'text/html' } });
    expect(() => negotiateExchange(cache, html, routedTo(nonResourceRequest('get', '/x')))).toThrow(
      expect.objectContaining({ code: 406 }),
    );
  });

  test('a media type the endpoint answers itself is its to answer: JSON for everything else (its errors)', () => {
    const protobuf = testExchange({
      headers: { accept: 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf' },
    });
    const produces = ['application/com.github.proto-openapi.spec.v2@v1.0+protobuf'];
    expect(
      negotiateExchange(
        new NegotiationCache(),
        protobuf,
        routedTo(nonResourceRequest('get', '/openapi/v2'), produces),
      ),
    ).toEqual({ format: 'json', upstreamAccept: 'application/json' });
    expect(() =>
      negotiateExchange(new NegotiationCache(), protobuf, routedTo(nonResourceRequest('get', '/openapi/v2'))),
    ).toThrow(expect.objectContaining({ code: 406 }));
  });
});

describe('a single object asked for as a list of metadata', () => {
  const metadataList = 'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io';
  const negotiated = (accept: string) => {
    const answer = new NegotiationCache().negotiate(accept);
    if (answer instanceof StatusError) throw answer;
    return answer;
  };

  test.each(['get', 'create', 'update', 'patch', 'delete'])(
    '%s: 406, as kube-apiserver answers for its own kinds',
    (verb) => {
      expect(objectAsListRefusal(negotiated(metadataList), verb)?.code).toBe(406);
      expect(objectAsListRefusal(negotiated(`${metadataList}, application/json`), verb)?.code).toBe(406);
    },
  );

  test('lists and watches may ask for it; objects may ask for other flavours, or for it after another', () => {
    expect(objectAsListRefusal(negotiated(metadataList), 'list')).toBeUndefined();
    expect(objectAsListRefusal(negotiated(metadataList), 'watch')).toBeUndefined();
    expect(
      objectAsListRefusal(negotiated('application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io'), 'get'),
    ).toBeUndefined();
    expect(
      objectAsListRefusal(negotiated(`application/json;as=Table;v=v1;g=meta.k8s.io, ${metadataList}`), 'get'),
    ).toBeUndefined();
    expect(objectAsListRefusal(negotiated(`application/yaml, ${metadataList}`), 'get')).toBeUndefined();
  });

  test('the stage refuses it for resource requests', () => {
    const exchange = testExchange({ headers: { accept: metadataList } });
    expect(() => negotiateExchange(new NegotiationCache(), exchange, routedTo(keysRequest('get')))).toThrow(
      expect.objectContaining({ code: 406 }),
    );
    expect(negotiateExchange(new NegotiationCache(), exchange, routedTo(keysRequest('list')))).toBeDefined();
  });
});
