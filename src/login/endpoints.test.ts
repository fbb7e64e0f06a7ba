import { describe, expect, it, test } from 'vitest';
import type { ConfigStatus } from '../api/config.ts';
import { StatusError } from '../api/status.ts';
import { LoginEndpoints, type LoginEndpointsDeps } from './endpoints.ts';
import { authHeaders, type LoginHttpRequest, refusalStatus } from './http-answers.ts';
import { LoginRefused } from './identity.ts';
import type { ConnectorRegistry } from './registry.ts';
import { SealBroken } from './secrets.ts';
import { InvalidCredentials } from './service.ts';
import { LoginThrottled } from './throttle.ts';

describe('sign-in refusals as the one Status type', () => {
  test.each([
    [new InvalidCredentials(), 401, 'Unauthorized'],
    [new LoginRefused('no'), 403, 'Forbidden'],
    [new SealBroken(), 400, 'BadRequest'],
  ])('%s is a StatusError of its code with the Kubernetes reason', (err, code, reason) => {
    const status = refusalStatus(err);
    expect(status).toBeInstanceOf(StatusError);
    expect(status.toStatus()).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: err.message,
      reason,
      code,
    });
  });

  test('a throttled sign-in says when to come back, in the body and in Retry-After', () => {
    const status = refusalStatus(new LoginThrottled(42));
    expect(status.toStatus()).toMatchObject({
      code: 429,
      reason: 'TooManyRequests',
      details: { retryAfterSeconds: 42 },
    });
    expect(status.headers).toEqual({ 'Retry-After': '42' });
  });

  test('anything that is no refusal is a 500 that tells nothing', () => {
    const status = refusalStatus(new Error('database password is hunter2'));
    expect(status.toStatus()).toMatchObject({ code: 500, reason: 'InternalError' });
    expect(status.message).not.toContain('hunter2');
  });
});

describe('the login endpoints answer refusals', () => {
  const errors: unknown[] = [];
  const endpoints = new LoginEndpoints({
    config: () => ({ auth: {} }) as unknown as ConfigStatus,
    connectors: { method: () => undefined } as unknown as ConnectorRegistry,
    onError: (err: unknown) => errors.push(err),
  } as unknown as LoginEndpointsDeps);
  const request = (method: string, url: string, headers: Record<string, string> = {}): LoginHttpRequest => ({
    method,
    url,
    headers,
    source: '127.0.0.1',
    secure: true,
  });

  test('as a Status to JSON clients, as a page to browsers', async () => {
    const json = await endpoints.connectorSignIn(
      request('GET', '/auth/nope/login', { accept: 'application/json' }),
    );
    expect(json?.status).toBe(403);
    expect(json?.headers['content-type']).toBe('application/json');
    expect(JSON.parse(json?.body ?? '')).toEqual(
      new StatusError(403, 'Forbidden', 'there is no sign-in method "nope"').toStatus(),
    );
    const page = await endpoints.connectorSignIn(request('GET', '/auth/nope/login'));
    expect(page?.status).toBe(403);
    expect(page?.headers['content-type']).toContain('text/html');
    expect(errors).toEqual([]);
  });

  test('sign out without a key: 401 Status', async () => {
    const answer = await endpoints.signOut(request('POST', '/auth/logout'));
    expect(answer?.status).toBe(401);
    expect(JSON.parse(answer?.body ?? '')).toMatchObject({
      kind: 'Status',
      status: 'Failure',
      reason: 'Unauthorized',
      code: 401,
    });
  });
});

describe('authHeaders', () => {
  it('adds customHttpHeaders to the defaults, which they may override', () => {
    expect(authHeaders({ 'X-Login': 'yes', 'X-Frame-Options': 'SAMEORIGIN' })).toEqual({
      'cache-control': 'no-store',
      'x-frame-options': 'SAMEORIGIN',
      'x-login': 'yes',
    });
    expect(authHeaders(undefined)).toEqual({ 'cache-control': 'no-store', 'x-frame-options': 'DENY' });
  });

  it('leaves out headers that frame the answer and those no HTTP answer can carry', () => {
    expect(
      authHeaders({
        'Content-Length': '1',
        'Set-Cookie': 'a=b',
        Location: 'https://elsewhere.example',
        'Not A Header': 'x',
        'X-Split': 'one\r\nX-Injected: two',
        'X-Kept': 'kept',
      }),
    ).toEqual({ 'cache-control': 'no-store', 'x-frame-options': 'DENY', 'x-kept': 'kept' });
  });

  it('carries headers named like Object.prototype members as headers (issue 29)', () => {
    // As JSON.parse or YAML gives them: __proto__ is a key of its own (a valid header name).
    const custom = Object.fromEntries([
      ['__proto__', 'p'],
      ['constructor', 'c'],
      ['toString', 't'],
    ]);
    const headers = authHeaders(custom);
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype);
    expect(Object.entries(headers)).toEqual([
      ['cache-control', 'no-store'],
      ['x-frame-options', 'DENY'],
      ['__proto__', 'p'],
      ['constructor', 'c'],
      ['tostring', 't'],
    ]);
  });
});

describe('the login page for the OpenID provider', () => {
  const page = async (url: string, served: boolean) => {
    const endpoints = new LoginEndpoints({
      config: () => ({ auth: {} }) as unknown as ConfigStatus,
      connectors: { method: () => undefined } as unknown as ConnectorRegistry,
      ...(served ? { openIdProvider: { interactionReturn: async () => '/' } } : {}),
    } as unknown as LoginEndpointsDeps);
    const answer = await endpoints.loginPage({
      method: 'GET',
      url,
      headers: {},
      source: '127.0.0.1',
      secure: true,
    });
    return answer?.body ?? '';
  };

  it('carries a well-formed interaction to the password form, only when the provider is served', async () => {
    expect(await page('/auth/login?oidc=Ab_-9z', true)).toContain(
      'action="/auth/password/login?oidc=Ab_-9z"',
    );
    expect(await page('/auth/login?oidc=Ab_-9z', false)).toContain('action="/auth/password/login"');
  });

  it('drops an interaction that is no uid (it would be carried into links and redirects)', async () => {
    for (const uid of ['a"b', 'a/../b', 'a b', '', 'x'.repeat(65)]) {
      const body = await page(`/auth/login?oidc=${encodeURIComponent(uid)}`, true);
      expect(body, uid).toContain('action="/auth/password/login"');
    }
  });
});
