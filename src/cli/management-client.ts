import { readFileSync } from 'node:fs';
import { Agent, fetch } from 'undici';
import { BASE_PATH } from '../gateway/paths.ts';
import type { readKubeconfig } from './login/login-context.ts';

/**
 * Requests of the management API as a platform context (the one `platform login` writes): its
 * server, its CA (inline or a file) or `insecure-skip-tls-verify`, `tls-server-name`, and its
 * user's token (the platform key). What `platform kubeconfig`, `sleep` and `wake` send.
 */

type Kubeconfig = NonNullable<ReturnType<typeof readKubeconfig>>;

/** A platform context (`platformContextOf` in kubeconfig.ts): where the gateway is, how to trust it, whose key. */
export interface PlatformContext {
  readonly name: string;
  /** Its user entry (the key). */
  readonly user: string;
  /** The gateway's base URL: the management API server without `/kubernetes/management`. */
  readonly gatewayBase: string;
  /** Its cluster entry's fields but `server` (CA, `insecure-skip-tls-verify`, `tls-server-name`, `proxy-url`). */
  readonly connection: Readonly<Record<string, unknown>>;
}

export interface ManagementAnswer {
  readonly status: number;
  readonly body: unknown;
}

/** One request of the management API (a path under `/kubernetes/management`), its answer read as JSON. */
export type ManagementRequest = (
  method: 'GET' | 'PATCH',
  path: string,
  patch?: { readonly contentType: string; readonly body: unknown },
) => Promise<ManagementAnswer>;

export interface ManagementClient {
  readonly request: ManagementRequest;
  /**
   * A watch (`path` with `?watch=1...`): calls `onEvent` with each event until it returns true
   * (resolves true), the stream ends or `signal` aborts (resolves false); rejects on an error answer.
   */
  watch(path: string, onEvent: (event: unknown) => boolean, signal: AbortSignal): Promise<boolean>;
  close(): Promise<void>;
}

export function managementClient(config: Kubeconfig, platform: PlatformContext): ManagementClient {
  const token = config.users?.find((entry) => entry.name === platform.user)?.user.token;
  if (typeof token !== 'string')
    throw new Error(`the user of context "${platform.name}" holds no token (the platform key)`);
  const dispatcher = new Agent({ connect: tlsOptions(platform.connection) });
  const url = (path: string) => `${platform.gatewayBase}${BASE_PATH}${path}`;
  const authorization = `Bearer ${token}`;
  const request: ManagementRequest = async (method, path, patch) => {
    const response = await fetch(url(path), {
      method,
      dispatcher,
      headers: {
        authorization,
        accept: 'application/json',
        ...(patch ? { 'content-type': patch.contentType } : {}),
      },
      ...(patch ? { body: JSON.stringify(patch.body) } : {}),
    });
    return { status: response.status, body: await response.json().catch(() => undefined) };
  };
  const watch = async (path: string, onEvent: (event: unknown) => boolean, signal: AbortSignal) => {
    let response: Awaited<ReturnType<typeof fetch>>;
    try {
      response = await fetch(url(path), {
        dispatcher,
        signal,
        headers: { authorization, accept: 'application/json' },
      });
    } catch (err) {
      if (signal.aborted) return false;
      throw err;
    }
    if (response.status !== 200) {
      const body = (await response.json().catch(() => undefined)) as { message?: unknown } | undefined;
      throw new Error(answerError('GET', path, { status: response.status, body }));
    }
    return readEvents(response.body, onEvent, signal);
  };
  return { request, watch, close: () => dispatcher.close() };
}

/** Newline-delimited watch events, each handed to `onEvent` until it returns true. */
async function readEvents(
  body: AsyncIterable<Uint8Array> | null,
  onEvent: (event: unknown) => boolean,
  signal: AbortSignal,
): Promise<boolean> {
  if (!body) return false;
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for await (const chunk of body) {
      pending += decoder.decode(chunk, { stream: true });
      let newline = pending.indexOf('\n');
      while (newline >= 0) {
        const line = pending.slice(0, newline).trim();
        pending = pending.slice(newline + 1);
        if (line !== '' && onEvent(JSON.parse(line))) return true;
        newline = pending.indexOf('\n');
      }
    }
  } catch (err) {
    if (signal.aborted) return false;
    throw err;
  }
  return false;
}

function tlsOptions(connection: Readonly<Record<string, unknown>>) {
  const inlineCa = connection['certificate-authority-data'];
  const caFile = connection['certificate-authority'];
  const ca =
    typeof inlineCa === 'string'
      ? Buffer.from(inlineCa, 'base64').toString('utf8')
      : typeof caFile === 'string'
        ? readFileSync(caFile, 'utf8')
        : undefined;
  const servername = connection['tls-server-name'];
  return {
    ...(ca ? { ca } : {}),
    ...(connection['insecure-skip-tls-verify'] === true ? { rejectUnauthorized: false } : {}),
    ...(typeof servername === 'string' ? { servername } : {}),
  };
}

/** An error answer as a person reads it: the method, the path, the code and the Status message. */
export function answerError(method: string, path: string, answer: ManagementAnswer): string {
  if (answer.status === 401) return 'the platform refused the key (401): sign in again';
  const message = (answer.body as { message?: unknown } | undefined)?.message;
  return `${method} ${path}: the platform answered ${answer.status}${typeof message === 'string' ? `: ${message}` : ''}`;
}
