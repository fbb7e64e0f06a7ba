import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { UnexpectedAdmissionRequest } from './admission.ts';
import type { AdmissionDecision } from './decision.ts';
import { badRequest } from './decision.ts';
import {
  type AdmissionRequest,
  admissionResponse,
  MalformedAdmissionReview,
  parseAdmissionReview,
} from './review.ts';

/** PEM serving material; `caBundlePem` is what clients (the apiserver) must trust. */
export interface ServingMaterial {
  readonly certPem: string;
  readonly keyPem: string;
  readonly caBundlePem: string;
}

/** Where the server's certificate comes from; it notifies on every change (rotation, reload). */
export interface CertificateSource {
  current(): ServingMaterial;
  /** Calls `listener` after each change; returns the unsubscribe function. */
  subscribe(listener: (material: ServingMaterial) => void): () => void;
}

export type ReviewFunction = (path: string, request: AdmissionRequest) => Promise<AdmissionDecision>;

export interface AdmissionServerOptions {
  /** `127.0.0.1` for local runs and tests; `0.0.0.0` in a pod. */
  readonly host: string;
  /** 0 picks a free port (see {@link AdmissionServer.port}). */
  readonly port: number;
  readonly certificates: CertificateSource;
  readonly review: ReviewFunction;
  /** Paths that accept AdmissionReviews; others answer 404. */
  readonly paths: readonly string[];
  readonly logger?: Logger;
  /** Largest accepted body; an AdmissionReview carries up to two objects of up to ~1.5 MiB each. */
  readonly maxBodyBytes?: number;
}

const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;

class BodyTooLarge extends Error {
  override readonly name = 'BodyTooLarge';
}

/**
 * The HTTPS admission server. Every operator replica runs one (admission needs no leader). The
 * certificate is swapped in place with `setSecureContext` whenever the source changes, so
 * rotation drops no connection and needs no restart. Bad input is answered, never thrown: a
 * malformed body gets 400, a failure inside a rule a denial (fail closed).
 */
export class AdmissionServer {
  private readonly unsubscribe: () => void;

  private constructor(
    private readonly server: Server,
    private readonly options: AdmissionServerOptions,
  ) {
    this.unsubscribe = options.certificates.subscribe((material) => {
      server.setSecureContext({ cert: material.certPem, key: material.keyPem });
      options.logger?.info('admission webhook serving certificate reloaded');
    });
  }

  static async start(options: AdmissionServerOptions): Promise<AdmissionServer> {
    const material = options.certificates.current();
    let instance: AdmissionServer | undefined;
    const server = createServer(
      { cert: material.certPem, key: material.keyPem, minVersion: 'TLSv1.2' },
      (req, res) => {
        void instance?.handle(req, res);
      },
    );
    server.headersTimeout = 10_000;
    server.requestTimeout = 30_000;
    instance = new AdmissionServer(server, options);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port, options.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return instance;
  }

  /** The port actually bound. */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'https://webhook').pathname;
    try {
      if (req.method === 'GET' && (path === '/healthz' || path === '/readyz')) return reply(res, 200, 'ok');
      if (!this.options.paths.includes(path)) return reply(res, 404, 'not found');
      if (req.method !== 'POST') return reply(res, 405, 'only POST');
      if (!(req.headers['content-type'] ?? '').startsWith('application/json')) {
        return reply(res, 415, 'AdmissionReview bodies are application/json');
      }
      let body: unknown;
      try {
        body = JSON.parse(await readBody(req, this.options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES));
      } catch (err) {
        if (err instanceof BodyTooLarge) return reply(res, 413, 'body too large');
        return reply(res, 400, 'the body is not JSON');
      }
      let request: AdmissionRequest;
      try {
        request = parseAdmissionReview(body);
      } catch (err) {
        if (err instanceof MalformedAdmissionReview) return reply(res, 400, err.message);
        throw err;
      }
      let decision: AdmissionDecision;
      try {
        decision = await this.options.review(path, request);
      } catch (err) {
        if (!(err instanceof UnexpectedAdmissionRequest)) throw err;
        decision = badRequest(err.message);
      }
      this.options.logger?.debug(
        {
          uid: request.uid,
          path,
          resource: request.resource.resource,
          namespace: request.namespace,
          name: request.name,
          operation: request.operation,
          dryRun: request.dryRun,
          allowed: decision.allowed,
          code: decision.code,
        },
        'admission review',
      );
      reply(res, 200, JSON.stringify(admissionResponse(request, decision)), 'application/json');
    } catch (err) {
      this.options.logger?.error(
        { err: err instanceof Error ? err.name : 'unknown', path },
        'admission review failed',
      );
      if (!res.headersSent) reply(res, 500, 'internal error');
    }
  }
}

function reply(
  res: ServerResponse,
  status: number,
  body: string,
  contentType = 'text/plain; charset=utf-8',
): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Past the limit the rest is drained, not kept, so the 413 still reaches the client.
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) chunks.push(chunk);
    });
    req.on('error', reject);
    req.on('end', () => {
      if (size > limit) reject(new BodyTooLarge());
      else resolve(Buffer.concat(chunks).toString('utf8'));
    });
  });
}
