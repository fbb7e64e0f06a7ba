import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface, type Interface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { compactDecrypt, exportJWK, generateKeyPair } from 'jose';
import { CLI_HANDOFF_ALGORITHMS, verificationCode } from '../../login/cli-handoff.ts';
import { type BrowserOpener, browserFailure, browserOpener } from './browser-opener.ts';
import { platformBase, type SignedIn } from './signed-in.ts';

/**
 * A browser sign-in of `platform login`: the key travels sealed to a key pair made for this
 * sign-in only (`src/login/cli-handoff.ts`), handed to a loopback listener when the browser is on
 * this machine, else pasted by the person from the page into the terminal.
 */

/** The key pair of one browser sign-in: the public half goes with the login URL. */
export interface SignInKeys {
  /** X25519, base64url: the `cli` parameter. */
  readonly publicKey: string;
  readonly privateKey: CryptoKey;
  /** What the page shows for this sign-in, and the terminal too. */
  readonly verification: string;
  /**
   * The origin of the platform signed in to. Anyone who saw the login URL can seal a code to its
   * public key (ECDH-ES proves nothing about the sender), so a code naming any other server is
   * refused: the kubeconfig never points a key at a server the person did not choose.
   */
  readonly origin: string;
}

export async function signInKeys(platformUrl: string): Promise<SignInKeys> {
  const { publicKey, privateKey } = await generateKeyPair(CLI_HANDOFF_ALGORITHMS.alg, { crv: 'X25519' });
  const { x } = await exportJWK(publicKey);
  if (!x) throw new Error('no X25519 key');
  return { publicKey: x, privateKey, verification: verificationCode(x), origin: new URL(platformUrl).origin };
}

/** A code that is not this sign-in's (another terminal's, mistyped, cut short). */
export class CodeRefused extends Error {
  override readonly name = 'CodeRefused';
}

/** What a code the platform sealed for this sign-in holds. */
export async function openCode(code: string, keys: SignInKeys): Promise<SignedIn> {
  let fields: Record<string, unknown>;
  try {
    const { plaintext } = await compactDecrypt(code.replace(/\s+/g, ''), keys.privateKey, {
      keyManagementAlgorithms: [CLI_HANDOFF_ALGORITHMS.alg],
      contentEncryptionAlgorithms: [CLI_HANDOFF_ALGORITHMS.enc],
    });
    fields = JSON.parse(new TextDecoder().decode(plaintext));
  } catch {
    throw new CodeRefused(
      `this code is not for this sign-in: paste the whole code of the page that names ${keys.verification}`,
    );
  }
  const { key, keyName, user, server } = fields;
  if (typeof key !== 'string' || typeof server !== 'string')
    throw new CodeRefused('the code holds no key; sign in again');
  if (originOf(server) !== keys.origin)
    throw new CodeRefused(`the code names another server than ${keys.origin}; it is not from your sign-in`);
  return {
    key,
    keyName: typeof keyName === 'string' ? keyName : '',
    user: typeof user === 'string' ? user : '',
    server,
  };
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/** The login page for this sign-in: its key, and the loopback listener when the browser is local. */
export function signInUrl(url: string, keys: SignInKeys, returnTo?: string): string {
  const query = new URLSearchParams({ cli: keys.publicKey });
  if (returnTo) query.set('return', returnTo);
  return `${platformBase(url)}/auth/login?${query}`;
}

/**
 * A one-shot listener on 127.0.0.1 for the platform's page to POST the sealed code to (checked
 * against a random state in the return address; a code that does not open is refused and the
 * listener waits on).
 */
export async function loopbackListener(keys: SignInKeys): Promise<{
  readonly returnTo: string;
  readonly result: Promise<SignedIn>;
  close(): void;
}> {
  const state = randomBytes(16).toString('hex');
  let resolve: (value: SignedIn) => void = () => {};
  const result = new Promise<SignedIn>((done) => {
    resolve = done;
  });
  const server = createServer((req, res) => {
    const target = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (
      req.method !== 'POST' ||
      target.pathname !== '/callback' ||
      target.searchParams.get('state') !== state
    ) {
      res.writeHead(404).end();
      return;
    }
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString('utf8');
    });
    req.on('end', () => {
      openCode(new URLSearchParams(body).get('code') ?? '', keys).then(
        (signedIn) => {
          res
            .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
            .end(
              '<!doctype html><title>Signed in</title><p>Signed in. You can close this window and return to the terminal.</p>',
            );
          resolve(signedIn);
        },
        (err: Error) => {
          res.writeHead(400, { 'content-type': 'text/plain; charset=utf-8' }).end(err.message);
        },
      );
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    returnTo: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback?state=${state}`,
    result,
    close: () => {
      server.close();
      server.closeAllConnections();
    },
  };
}

export interface BrowserSignInOptions {
  /** Try a browser on this machine (`--no-browser`: false). */
  readonly openBrowser: boolean;
  /** Where the person types (the terminal). */
  readonly input: Readable;
  /** Where the command talks to the person. */
  readonly output: Writable;
  readonly platform?: NodeJS.Platform;
  readonly env?: NodeJS.ProcessEnv;
  /** How long a browser on this machine has to hand the code back. Default 5 minutes. */
  readonly loopbackTimeoutMs?: number;
}

/** Asks for the code until one opens (empty lines are asked again; three codes that do not open end it). */
async function pastedCode(keys: SignInKeys, lines: Interface, output: Writable): Promise<SignedIn> {
  const ended = new Promise<undefined>((resolve) => lines.once('close', () => resolve(undefined)));
  let refused = 0;
  while (refused < 3) {
    const line = await Promise.race([
      new Promise<string>((resolve) => lines.question('Code: ', resolve)),
      ended,
    ]);
    if (line === undefined) throw new Error('no code was pasted: the input ended');
    if (line.trim() === '') continue;
    try {
      return await openCode(line, keys);
    } catch (err) {
      if (!(err instanceof CodeRefused)) throw err;
      output.write(`${err.message}\n`);
      refused++;
    }
  }
  throw new Error('no code of this sign-in was pasted');
}

/**
 * A browser sign-in. With a browser on this machine, it opens the login page and waits for the
 * page to hand the code to the loopback listener; without one (or when it fails to start), it
 * prints the login page's address for a browser anywhere and reads the code the page shows.
 */
export async function loginWithBrowser(url: string, options: BrowserSignInOptions): Promise<SignedIn> {
  const keys = await signInKeys(url);
  const { output } = options;
  const say = (text: string) => output.write(text);
  if (options.openBrowser && browserOpener(url, options.platform, options.env) !== undefined) {
    const listener = await loopbackListener(keys);
    const local = signInUrl(url, keys, listener.returnTo);
    const opener = browserOpener(local, options.platform, options.env) as BrowserOpener;
    say(
      `Opening your browser to sign in (this terminal shows ${keys.verification}):\n\n  ${local}\n\n` +
        'Signing in on another device? Press Ctrl-C and run platform login with --no-browser.\n',
    );
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), options.loopbackTimeoutMs ?? 5 * 60_000);
    });
    try {
      const first = await Promise.race([
        listener.result,
        browserFailure(opener).then(() => 'failed' as const),
        timedOut,
      ]);
      if (first === 'timeout') throw new Error('no sign-in arrived from the browser in time');
      if (first !== 'failed') return first;
      say('The browser could not be opened.\n');
    } finally {
      clearTimeout(timer);
      listener.close();
    }
  }
  say(
    `Open this address in a browser on any device and sign in:\n\n  ${signInUrl(url, keys)}\n\n` +
      `The page then shows a code for the terminal showing ${keys.verification}; paste it here.\n`,
  );
  const lines = createInterface({
    input: options.input,
    output,
    terminal: (options.input as { isTTY?: boolean }).isTTY === true,
  });
  try {
    return await pastedCode(keys, lines, output);
  } finally {
    lines.close();
  }
}
