/**
 * The gateway pipeline's stages measured alone (bench/gateway, after the load runs): each stage's
 * function, in this process, over the same request a measured GET through the gateway is (the
 * benchmark key's `Authorization`, `Accept: application/json`, the SharedSecret's path), with the
 * same inputs the stages hand each other there, so that the table shows where the pipeline's own
 * cost (the gateway's CPU per GET minus the bare proxy's) goes:
 *
 *   exchange      the request as the pipeline starts with it (`receivedExchange`: its abort signal,
 *                 its client address);
 *   route         the endpoint table's routing to the proxy (the path grammar, the attributes);
 *   authenticate  the bearer key to an identity, by the gateway's authenticator on its informer
 *                 caches (the real `AccessKeyAuthenticator`, synced from the benchmark's apiserver),
 *                 the throttle's "cached only" check first;
 *   negotiate     the Accept header to an answer format;
 *   throttle+scope  the watch slot (none for a GET) and the key's scope;
 *   receive       the body (none for a GET);
 *   audit         the audit decision (as in the benchmark, no audit log: level None);
 *   dispatch      the impersonation headers and the proxy's request, up to the upstream call (an
 *                 upstream that answers at once with the apiserver's real answer);
 *   encode        the answer relayed: the apiserver's real answer (its headers, its body as one
 *                 chunk, as undici delivers a small one; see {@link undiciLikeBody}) read and written with its length to a
 *                 response that only records it, the request counted (metrics).
 *
 * What the stages leave out is what the bare proxy pays too: Node's HTTP server and undici.
 * Each stage runs in blocks of {@link BLOCK} calls, interleaved, {@link ROUNDS} rounds; its figure
 * is the median of its blocks' CPU time (`process.cpuUsage`, this thread's GC included) per call.
 */

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { arrayBuffer as consumeArrayBuffer } from 'node:stream/consumers';
import pino from 'pino';
import { Registry } from 'prom-client';
import { Auditor } from '../../src/gateway/audit/auditor.ts';
import { GatewayMetrics } from '../../src/gateway/metrics.ts';
import { beginAudit } from '../../src/gateway/pipeline/audit.ts';
import { authenticateExchange } from '../../src/gateway/pipeline/authenticate.ts';
import { dispatch } from '../../src/gateway/pipeline/dispatch.ts';
import { respond } from '../../src/gateway/pipeline/encode.ts';
import type { Answering } from '../../src/gateway/pipeline/exchange.ts';
import { NegotiationCache, negotiateExchange } from '../../src/gateway/pipeline/negotiate.ts';
import { receiveBody } from '../../src/gateway/pipeline/receive.ts';
import { EndpointTable, type Routed } from '../../src/gateway/pipeline/route.ts';
import { checkRoutedScope } from '../../src/gateway/pipeline/scope.ts';
import { TrustedProxies } from '../../src/gateway/pipeline/source.ts';
import { DEFAULT_WATCH_LIMITS, holdWatchSlot, Throttle } from '../../src/gateway/pipeline/throttle.ts';
import type { Upstream, UpstreamResponse } from '../../src/gateway/proxy/upstream.ts';
import { receivedExchange } from '../../src/gateway/server.ts';
import { AuthFailureLimiter } from '../../src/http/failure-limiter.ts';
import type { AuthenticatedIdentity } from '../../src/identity/authenticate.ts';
import { setupAccessKeyAuthenticator } from '../../src/identity/authenticator.ts';
import { PepperStore } from '../../src/identity/pepper.ts';
import { systemClock, systemRandom } from '../../src/runtime/clock.ts';
import type { KubeClient } from '../../src/runtime/kube-client.ts';
import { Manager } from '../../src/runtime/manager.ts';
import { benchMode, quantile, waitUntil } from '../support.ts';

const BLOCK = 1_000;
/** Rounds of blocks: fewer in the smoke form, which only shows that the stages run. */
const ROUNDS = benchMode() === 'smoke' ? 3 : 40;

/** A real apiserver answer to the measured GET: what dispatch's upstream returns and encode relays. */
export interface RecordedAnswer {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

export interface StageInputs {
  readonly api: KubeClient;
  readonly platformNamespace: string;
  /** The benchmark key (plaintext). */
  readonly token: string;
  /** The measured GET's path as the client sends it (under the management API). */
  readonly path: string;
  readonly answer: RecordedAnswer;
}

/** Per stage, the median CPU microseconds per call. */
export type StageTable = readonly {
  readonly stage: string;
  readonly micros: number;
  readonly spread: string;
}[];

/** Measures each stage alone (see the file comment); the authenticator is started and stopped here. */
export async function measureStages(inputs: StageInputs): Promise<StageTable> {
  const quiet = pino({ level: 'silent' });
  const manager = new Manager({
    api: inputs.api,
    clock: systemClock,
    random: systemRandom,
    logger: quiet,
    registry: new Registry(),
  });
  const authenticator = setupAccessKeyAuthenticator(manager, {
    api: inputs.api,
    clock: systemClock,
    pepper: new PepperStore(inputs.api, inputs.platformNamespace, randomBytes),
    platformNamespace: inputs.platformNamespace,
  });
  await manager.start();
  await authenticator.start();
  try {
    await waitUntil(
      "the key in the authenticator's caches",
      () => authenticator.ready() && authenticator.authenticateCached(inputs.token).ok,
      { boundMs: 60_000, intervalMs: 100 },
    );
    return await measure(inputs, authenticator);
  } finally {
    await manager.stop();
  }
}

/** A response that records nothing but what encode asks of a `ServerResponse`. */
class RecordingResponse extends EventEmitter {
  headersSent = false;
  destroyed = false;
  writableFinished = false;
  code = 0;
  setHeader(): this {
    return this;
  }
  writeHead(code: number): this {
    this.code = code;
    this.headersSent = true;
    return this;
  }
  end(): this {
    this.writableFinished = true;
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    return this;
  }
}

async function measure(
  inputs: StageInputs,
  authenticator: ReturnType<typeof setupAccessKeyAuthenticator>,
): Promise<StageTable> {
  const request = {
    method: 'GET',
    url: inputs.path,
    headers: {
      host: '127.0.0.1',
      authorization: `Bearer ${inputs.token}`,
      accept: 'application/json',
    },
    rawHeaders: [],
    socket: { remoteAddress: '127.0.0.1' },
  } as unknown as IncomingMessage;
  const trusted = new TrustedProxies([]);
  const newExchange = () =>
    receivedExchange(request, new RecordingResponse() as unknown as ServerResponse, trusted, false);
  const exchange = newExchange();
  const table = new EndpointTable([]);
  const lookup = { projectOfNamespace: () => undefined, namespaceOfProject: () => undefined };
  const routed = table.route(exchange.method, exchange.path, exchange.search, lookup) as Routed;
  if (routed.kind !== 'proxy') throw new Error(`the measured GET routes to ${routed.kind}, not the proxy`);
  const throttle = new Throttle(new AuthFailureLimiter(), DEFAULT_WATCH_LIMITS);
  const authenticated = authenticateExchange({ authenticator, throttle }, exchange);
  if (authenticated instanceof Promise || !authenticated.identity)
    throw new Error('the benchmark key is not accepted from the caches');
  const identity: AuthenticatedIdentity = authenticated.identity;
  const negotiation = new NegotiationCache();
  const negotiated = negotiateExchange(negotiation, exchange, routed);
  const auditor = new Auditor();
  const metrics = new GatewayMetrics(new Registry());
  const encodeDeps = { metrics, logger: pino({ level: 'silent' }) };
  const answer = inputs.answer;
  const relayed = (): UpstreamResponse =>
    ({
      statusCode: answer.statusCode,
      headers: answer.headers,
      body: undiciLikeBody(answer.body),
    }) as unknown as UpstreamResponse;
  const upstream = { request: () => Promise.resolve(relayed()) } as unknown as Upstream;
  const proxyDeps = { proxy: { upstream, maxWatchSeconds: 1800 }, throttle };
  let sink = 0;
  /** Each stage runs `count` calls and returns the CPU microseconds they took. */
  const stages: Record<string, (count: number) => Promise<number>> = {
    exchange: cpuOf((count) => {
      for (let i = 0; i < count; i++) sink += newExchange().started;
    }),
    route: cpuOf((count) => {
      for (let i = 0; i < count; i++)
        sink += table.route(exchange.method, exchange.path, exchange.search, lookup).kind.length;
    }),
    authenticate: cpuOf((count) => {
      for (let i = 0; i < count; i++) {
        const result = authenticateExchange({ authenticator, throttle }, exchange);
        if (result instanceof Promise || !result.identity) throw new Error('authentication failed');
      }
    }),
    negotiate: cpuOf((count) => {
      for (let i = 0; i < count; i++) sink += negotiateExchange(negotiation, exchange, routed).format.length;
    }),
    'throttle+scope': cpuOf((count) => {
      for (let i = 0; i < count; i++) {
        if (holdWatchSlot(throttle, exchange, { identity, attributes: routed.attributes })) sink++;
        checkRoutedScope(identity, routed);
      }
    }),
    receive: cpuOf(async (count) => {
      for (let i = 0; i < count; i++) sink += (await receiveBody(exchange, routed)).bytes.length;
    }),
    audit: cpuOf((count) => {
      for (let i = 0; i < count; i++)
        if (beginAudit(auditor, exchange, { attributes: routed.attributes, identity, sensitive: false }))
          sink++;
    }),
    dispatch: cpuOf(async (count) => {
      for (let i = 0; i < count; i++) {
        const relay = await dispatch(proxyDeps, {
          exchange,
          routed,
          query: new URLSearchParams(exchange.search),
          bytes: Buffer.alloc(0),
          body: undefined,
          identity,
          negotiated,
        });
        sink += (relay as { relay: UpstreamResponse }).relay.statusCode;
      }
    }),
    encode: async (count) => {
      // The answers' inputs are made first: only the answers are counted.
      const pending = Array.from({ length: count }, () => ({
        answering: {
          exchange: newExchange(),
          attributes: routed.attributes,
          negotiated,
          audit: undefined,
          release: undefined,
        } satisfies Answering,
        relay: { relay: relayed(), redaction: undefined },
      }));
      const started = process.cpuUsage();
      for (const { answering, relay } of pending) {
        await respond(encodeDeps, answering, { kind: 'relay', relay });
        sink += (answering.exchange.response as unknown as RecordingResponse).code;
      }
      return cpuMicros(process.cpuUsage(started));
    },
  };
  const measured = await interleaved(stages);
  if (sink === 0) throw new Error('the stages computed nothing');
  return measured;
}

/**
 * A body as undici hands it: a stream of one chunk (a small answer), readable whole by
 * `arrayBuffer()` (here `node:stream/consumers`, standing in for undici's own consumer).
 */
function undiciLikeBody(bytes: Buffer): Readable & { arrayBuffer(): Promise<ArrayBuffer> } {
  const stream = Readable.from([bytes], { objectMode: false });
  return Object.assign(stream, { arrayBuffer: () => consumeArrayBuffer(stream) });
}

const cpuMicros = (usage: NodeJS.CpuUsage) => usage.user + usage.system;

/** `run(count)` timed: the CPU microseconds it took. */
function cpuOf(run: (count: number) => Promise<void> | void): (count: number) => Promise<number> {
  return async (count) => {
    const started = process.cpuUsage();
    await run(count);
    return cpuMicros(process.cpuUsage(started));
  };
}

/**
 * Every stage in blocks of {@link BLOCK} calls, one block of each per round (a shared machine's
 * slow spells fall on all alike); per stage the median of its blocks per call, with p10-p90.
 */
async function interleaved(stages: Record<string, (count: number) => Promise<number>>): Promise<StageTable> {
  // Warm-up: the JIT compiles each stage before it is measured.
  for (const run of Object.values(stages)) await run(BLOCK);
  const perCall: Record<string, number[]> = Object.fromEntries(
    Object.keys(stages).map((stage) => [stage, []]),
  );
  for (let round = 0; round < ROUNDS; round++)
    for (const [stage, run] of Object.entries(stages)) perCall[stage]?.push((await run(BLOCK)) / BLOCK);
  return Object.entries(perCall).map(([stage, values]) => ({
    stage,
    micros: quantile(values, 0.5),
    spread: `${quantile(values, 0.1).toFixed(1)}-${quantile(values, 0.9).toFixed(1)}`,
  }));
}

/** The table as printed, with the sum and the whole request's figures beside it. */
export function stageRows(table: StageTable, gatewayMicros: number, bareMicros: number): string {
  const sum = table.reduce((total, row) => total + row.micros, 0);
  return [
    `pipeline stages alone (CPU µs per call, median of ${ROUNDS} blocks of ${BLOCK}, p10-p90):`,
    ...table.map((row) => `  ${row.stage.padEnd(16)} ${row.micros.toFixed(1).padStart(6)}  (${row.spread})`),
    `  ${'sum'.padEnd(16)} ${sum.toFixed(1).padStart(6)}`,
    `  whole GET: gateway ${gatewayMicros.toFixed(0)} µs, bare proxy ${bareMicros.toFixed(0)} µs, the gateway's own ${(gatewayMicros - bareMicros).toFixed(0)} µs (${(gatewayMicros / bareMicros).toFixed(2)}x the floor; goal <= 1.3x)`,
  ].join('\n');
}
