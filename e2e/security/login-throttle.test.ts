import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, type Dispatcher } from 'undici';
import { describe, expect, it } from 'vitest';
import { type Answer, call } from '../gateway/support.ts';
import { useLoginEnv } from '../login/support/login-env.ts';

/**
 * Issue 32, items 4, 5 and 7: attacks on the password throttle, made through the gateway's login
 * endpoints as an anonymous caller would. The gateway trusts the proxy at 127.0.0.1, so each
 * request names its client by `X-Forwarded-For`; every test uses addresses of its own (a block of
 * 198.18.0.0/15, the benchmarking range), so that no throttle leaks from one test to another.
 */

const PER_USER = 5;
const PER_SOURCE = 5;
const env = useLoginEnv({
  throttle: {
    perSource: { failures: PER_SOURCE, windowSeconds: 600, blockSeconds: 600 },
    perUser: { failures: PER_USER, windowSeconds: 600, blockSeconds: 600 },
    perDevice: { failures: 5, windowSeconds: 600, blockSeconds: 600 },
    // The default caps on checks running at once.
  },
});

const PLATFORM = join(import.meta.dirname, '..', '..', 'bin', 'platform.js');

const passwordLogin = (
  username: string,
  password: string,
  source: string,
  extra: Record<string, string> = {},
  dispatcher: Dispatcher | undefined = env().gateway.dispatcher,
): Promise<Answer> =>
  call(`${env().platformUrl}/auth/password/login`, {
    method: 'POST',
    body: JSON.stringify({ username, password, ...extra }),
    headers: { 'content-type': 'application/json', accept: 'application/json', 'x-forwarded-for': source },
    dispatcher,
  });

/** A sign-in's answer and how long it took. */
async function timed(attempt: () => Promise<Answer>): Promise<{ answer: Answer; ms: number }> {
  const start = performance.now();
  const answer = await attempt();
  return { answer, ms: performance.now() - start };
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

/** How many answers had each status. */
function statuses(answers: Answer[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const answer of answers) counts[answer.status] = (counts[answer.status] ?? 0) + 1;
  return counts;
}

function expectThrottled(answer: Answer) {
  expect(answer.status, answer.text).toBe(429);
  expect(answer.json).toMatchObject({ kind: 'Status', code: 429, reason: 'TooManyRequests' });
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(answer.json.key).toBeUndefined();
}

describe('password guesses sent at once', () => {
  it('are checked no more often than the per-user limit, and the right password after them is refused', async () => {
    await env().configure('');
    const name = await env().userWithPassword('burst', 'the real password');
    // Waves of 30 guesses at once, each guess from an address of its own, until the user is blocked
    // (a wave refused whole, not for checks running at once: Retry-After over 1 second).
    let checked = 0;
    let sent = 0;
    for (let wave = 0; wave < 10; wave++) {
      const guesses = await Promise.all(
        Array.from({ length: 30 }, () => {
          sent++;
          return passwordLogin(name, `guess number ${sent}`, `198.19.${sent >> 8}.${sent & 0xff}`);
        }),
      );
      const counts = statuses(guesses);
      // Checked: answered 401 (wrong password); refused unchecked: 429.
      expect((counts[401] ?? 0) + (counts[429] ?? 0), JSON.stringify(counts)).toBe(30);
      for (const answer of guesses.filter((guess) => guess.status === 429)) expectThrottled(answer);
      checked += counts[401] ?? 0;
      expect(checked, `wave ${wave}: ${JSON.stringify(counts)}`).toBeLessThanOrEqual(PER_USER);
      if (guesses.every((guess) => Number(guess.headers.get('retry-after')) > 1)) break;
    }
    expect(checked).toBe(PER_USER);
    // The user is blocked for unknown devices: the right password from a fresh address too.
    expectThrottled(await passwordLogin(name, 'the real password', '198.18.9.200'));
    expect(await env().loginKeys(name)).toEqual([]);
  });

  it('from one address are mostly refused at once, and a real sign-in meanwhile answers about as fast as when idle', async () => {
    await env().configure('');
    const name = await env().userWithPassword('bystander', 'bystander password');
    // The real person's connections are their own, as another client's would be.
    const own = new Agent({ connect: { ca: env().caPem } });
    const real = (source: string) => passwordLogin(name, 'bystander password', source, {}, own);
    // Idle: the real sign-in alone (a median of three, each from an address of its own).
    const idle: number[] = [];
    for (let i = 0; i < 3; i++) {
      const { answer, ms } = await timed(() => real(`198.18.2.${i + 1}`));
      expect(answer.status, answer.text).toBe(200);
      idle.push(ms);
    }
    // 100 bogus sign-ins from one address, and the real one from another while they are in flight.
    const burst = Array.from({ length: 100 }, (_, i) =>
      passwordLogin(`nobody-${i}`, 'some guess or other', '198.18.2.100'),
    );
    // Once the gateway answers one of them the attack is under way; the real person arrives.
    await Promise.race(burst);
    const during = await timed(() => real('198.18.2.4'));
    const answers = await Promise.all(burst);
    expect(during.answer.status, during.answer.text).toBe(200);
    const counts = statuses(answers);
    expect(counts[401] ?? 0, JSON.stringify(counts)).toBeLessThanOrEqual(PER_SOURCE);
    expect((counts[401] ?? 0) + (counts[429] ?? 0), JSON.stringify(counts)).toBe(100);
    const ratio = during.ms / median(idle);
    // Unthrottled, the real sign-in waits behind every bogus scrypt (issue 32: 17.8 s against 0.2 s).
    expect(
      ratio,
      `idle ${idle.map(Math.round)} ms, during the burst ${Math.round(during.ms)} ms`,
    ).toBeLessThan(6);
    await own.close();
  });
});

describe('spellings of a username', () => {
  it('are no way around the per-user limit: a name that is no User name signs no one in', async () => {
    await env().configure('');
    const name = await env().userWithPassword('spelled', 'the real password');
    for (let i = 0; i < PER_USER; i++)
      expect((await passwordLogin(name, `wrong ${i}`, `198.18.3.${i + 1}`)).status).toBe(401);
    expectThrottled(await passwordLogin(name, 'the real password', '198.18.3.50'));
    // Spellings the apiserver would read as the same User get no counter of their own, and no key.
    for (const [i, spelling] of [
      `${name}/`,
      `${name}//`,
      ` ${name}`,
      name.toUpperCase(),
      `${name}%2F`,
    ].entries()) {
      const answer = await passwordLogin(spelling, 'the real password', `198.18.3.${60 + i}`);
      expect(answer.status, `${JSON.stringify(spelling)}: ${answer.text}`).toBe(401);
      expect(answer.json.message).toBe('wrong username or password');
      expect(answer.json.key).toBeUndefined();
    }
    expect(await env().loginKeys(name)).toEqual([]);
  });

  it('are refused even when nobody guessed: only the User name signs in', async () => {
    await env().configure('');
    const name = await env().userWithPassword('exact', 'the real password');
    const slash = await passwordLogin(`${name}/`, 'the real password', '198.18.4.1');
    expect(slash.status, slash.text).toBe(401);
    expect(await env().loginKeys(name)).toEqual([]);
    expect((await passwordLogin(name, 'the real password', '198.18.4.2')).status).toBe(200);
  });
});

describe('platform login --password', () => {
  /** `platform login --password` as from a script, the password on stdin; its exit code and stderr. */
  function platformLogin(
    home: string,
    name: string,
    password: string,
  ): Promise<{ code: number; stderr: string }> {
    const child = spawn(
      PLATFORM,
      [
        'login',
        env().platformUrl,
        '--password',
        '--username',
        name,
        '--certificate-authority',
        env().caFile,
        '--kubeconfig',
        join(home, 'kubeconfig'),
      ],
      { env: { PATH: process.env.PATH ?? '', HOME: home }, stdio: ['pipe', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.stdin.end(`${password}\n`);
    return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? 1, stderr })));
  }

  it('keeps its device token (mode 0600) and sends it, so that others guessing do not lock the terminal out', async () => {
    await env().configure('');
    const home = mkdtempSync(join(tmpdir(), 'login-throttle-cli-'));
    const name = await env().userWithPassword('terminal', 'the real password');
    const first = await platformLogin(home, name, 'the real password');
    expect(first.code, first.stderr).toBe(0);
    const tokens = join(home, '.config', 'platform', 'device-tokens.json');
    expect(statSync(tokens).mode & 0o777).toBe(0o600);
    const kept = readFileSync(tokens, 'utf8');
    expect(kept).not.toContain('the real password');
    expect(kept).not.toContain('pak_');
    // Others guess until the user is blocked for unknown devices.
    for (let i = 0; i < PER_USER; i++) await passwordLogin(name, `wrong ${i}`, `198.18.5.${i + 1}`);
    expectThrottled(await passwordLogin(name, 'the real password', '198.18.5.50'));
    // The terminal signed in before still gets in: the platform honours the token it sends.
    const again = await platformLogin(home, name, 'the real password');
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(`Signed in as ${name}`);
    expect(await env().loginKeys(name)).toHaveLength(2);
  });
});
