import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signInKeys } from '../../src/cli/login/browser-sign-in.ts';
import { generateAccessKey } from '../../src/identity/keys.ts';
import { type Answer, call } from '../gateway/support.ts';
import { uniqueName } from '../support/cluster.ts';
import { useLoginEnv } from './support/login-env.ts';

/**
 * The login endpoints served by the real gateway (HTTPS, trusted proxy 127.0.0.1): what the
 * gateway's pipeline brings them (the client address a trusted proxy reports, the caller's key
 * for logout, scope checks and authorization of the password API), and what they add to every
 * answer (`customHttpHeaders`, no caching).
 */

const env = useLoginEnv({
  throttle: {
    perSource: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
    perUser: { failures: 100, windowSeconds: 600, blockSeconds: 600 },
    perDevice: { failures: 100, windowSeconds: 600, blockSeconds: 600 },
  },
  // The gateway's own limit on failed keys: a key id is blocked after its second failure.
  authFailureLimits: {
    perSource: { failures: 1000, windowSeconds: 3600, blockSeconds: 3600 },
    perKey: { failures: 2, windowSeconds: 3600, blockSeconds: 3600 },
  },
});

/** The headers every answer under /auth carries (`customHttpHeaders` as configured below). */
function expectAuthHeaders(answer: Answer, what: string) {
  expect(answer.headers.get('x-frame-policy'), what).toBe('sso-only');
  expect(answer.headers.get('cache-control'), what).toBe('no-store');
  expect(answer.headers.get('x-frame-options'), what).toBe('DENY');
}

const post = (
  path: string,
  body: unknown,
  options: { token?: string; headers?: Record<string, string> } = {},
) =>
  call(`${env().platformUrl}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: { 'content-type': 'application/json', accept: 'application/json', ...options.headers },
    ...(options.token ? { token: options.token } : {}),
    dispatcher: env().gateway.dispatcher,
  });

const signIn = (username: string, password: string, headers: Record<string, string> = {}) =>
  post('/auth/password/login', { username, password }, { headers });

describe('login endpoints in the gateway', () => {
  it('answer with the configured headers, and hand out kubeconfigs for the URL they were reached at', async () => {
    // A header that would frame the answer itself, and one no HTTP answer can carry, are left out.
    await env().configure(`
auth:
  customHttpHeaders:
    X-Frame-Policy: sso-only
    Content-Length: '1'
    'Not A Header': x
`);
    const name = await env().userWithPassword('headers', 'header password 1');
    const page = await call(`${env().platformUrl}/auth/login`, { dispatcher: env().gateway.dispatcher });
    expect(page.status).toBe(200);
    expectAuthHeaders(page, 'the login page');
    expect(page.text).toContain('password-form');
    const signedIn = await signIn(name, 'header password 1');
    expect(signedIn.status).toBe(200);
    expectAuthHeaders(signedIn, 'a password sign-in');
    expect(signedIn.json.server).toBe(env().gateway.base);
    // From a source of its own: the others' failures are not to count against 127.0.0.1.
    const wrong = await signIn(name, 'not the password 1', { 'x-forwarded-for': '192.0.2.50' });
    expect(wrong.status).toBe(401);
    expectAuthHeaders(wrong, 'a refused sign-in');
  });

  it("carry the configured headers on the gateway's own refusals, before any login code runs", async () => {
    await env().configure('auth: { customHttpHeaders: { X-Frame-Policy: sso-only } }');
    const g = env().gateway;
    const target = await env().userWithPassword('pwheaders', 'header password 2');
    const admin = await g.user(uniqueName('hdradmin'), { admin: true });
    const plain = await g.user(uniqueName('hdrplain'));
    await g.accepted(admin);
    await g.accepted(plain);
    const unknownKey = generateAccessKey((size) => randomBytes(size)).key;
    const answers: Record<string, [Answer, number]> = {
      // The pipeline's authentication: no key, an unknown key.
      'logout without a key': [await post('/auth/logout', {}), 401],
      'logout with an unknown key': [await post('/auth/logout', {}, { token: unknownKey }), 401],
      'the password API without a key': [
        await post(`/auth/users/${target}/password`, { password: 'no key at all 1' }),
        401,
      ],
      'the password API with an unknown key': [
        await post(`/auth/users/${target}/password`, { password: 'unknown key 1' }, { token: unknownKey }),
        401,
      ],
      // The pipeline's throttle: the same key id failed twice already.
      'a blocked key': [await post('/auth/logout', {}, { token: unknownKey }), 429],
      // The pipeline's routing: a method no login endpoint serves.
      'a method not served': [
        await call(`${env().platformUrl}/auth/login`, { method: 'PUT', dispatcher: g.dispatcher }),
        405,
      ],
      // Each login page is an endpoint of the table: a method it does not serve is 405, not 404.
      'a method the login page does not serve': [
        await call(`${env().platformUrl}/auth/login`, { method: 'POST', dispatcher: g.dispatcher }),
        405,
      ],
      'a method the password form does not serve': [
        await call(`${env().platformUrl}/auth/password/login`, { method: 'GET', dispatcher: g.dispatcher }),
        405,
      ],
      // The password API's own answers, refused and done.
      'the password API refusing': [
        await post(`/auth/users/${target}/password`, { password: 'not allowed 12' }, { token: plain }),
        403,
      ],
      'the password API setting it': [
        await post(`/auth/users/${target}/password`, { password: 'set by admin 12' }, { token: admin }),
        200,
      ],
    };
    for (const [what, [answer, code]] of Object.entries(answers)) {
      expect(answer.status, `${what}: ${answer.text}`).toBe(code);
      expectAuthHeaders(answer, what);
    }
    expect(answers['a blocked key']?.[0].headers.get('retry-after')).toBeTruthy();
    expect((await signIn(target, 'set by admin 12')).status).toBe(200);
  });

  it('throttle failures by the client address a trusted proxy reports', async () => {
    await env().configure('');
    const name = await env().userWithPassword('proxied', 'proxied password 1');
    const attacker = { 'x-forwarded-for': '203.0.113.7' };
    for (let i = 0; i < 3; i++) expect((await signIn(name, `guess ${i} wrong`, attacker)).status).toBe(401);
    const blocked = await signIn(name, 'proxied password 1', attacker);
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another client behind the same proxy is its own source.
    const other = await signIn(name, 'proxied password 1', { 'x-forwarded-for': '198.51.100.20' });
    expect(other.status).toBe(200);
  });

  it('hand a sign-in to a return address only with the key of a platform login: without cli the key page is shown', async () => {
    await env().configure('');
    const name = await env().userWithPassword('returned', 'returned password 1');
    const returnTo = 'http://127.0.0.1:9/callback';
    const formSignIn = (query: URLSearchParams, source: string) =>
      call(`${env().platformUrl}/auth/password/login?${query}`, {
        method: 'POST',
        body: new URLSearchParams({ username: name, password: 'returned password 1' }).toString(),
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          accept: 'text/html,application/xhtml+xml,*/*;q=0.8',
          'x-forwarded-for': source,
        },
        dispatcher: env().gateway.dispatcher,
      });
    // With a platform login's key: handed to the loopback address, sealed (no key on the page).
    const keys = await signInKeys(env().platformUrl);
    const handedOff = await formSignIn(
      new URLSearchParams({ cli: keys.publicKey, return: returnTo }),
      '192.0.2.71',
    );
    expect(handedOff.status, handedOff.text).toBe(200);
    expect(handedOff.text).toContain('127.0.0.1:9');
    expect(handedOff.text).not.toMatch(/pak_/);
    // Without it the return address is ignored: the key page, and nothing sent there.
    const ignored = await formSignIn(new URLSearchParams({ return: returnTo }), '192.0.2.72');
    expect(ignored.status, ignored.text).toBe(200);
    expect(ignored.text).toMatch(/pak_/);
    expect(ignored.text).not.toContain('127.0.0.1:9');
  });

  it("log out the caller's own key only", async () => {
    await env().configure('');
    const name = await env().userWithPassword('leaving', 'leaving password 1');
    const first = (await signIn(name, 'leaving password 1')).json;
    const second = (await signIn(name, 'leaving password 1')).json;
    await env().gateway.accepted(first.key);
    expect((await post('/auth/logout', {})).status).toBe(401);
    const out = await post('/auth/logout', {}, { token: first.key });
    expect(out.status).toBe(200);
    expect(out.json).toEqual({ loggedOut: true, redirect: `${env().platformUrl}/auth/login` });
    expect((await env().loginKeys(name)).map((key) => key.metadata.name)).toEqual([second.keyName]);
  });
});

describe('the password API', () => {
  const setPassword = (user: string, body: unknown, token: string) =>
    post(`/auth/users/${user}/password`, body, { token });

  it('lets platform admins and those RBAC allows set passwords, and users change their own with the old one', async () => {
    await env().configure('');
    const g = env().gateway;
    const admin = await g.user(uniqueName('pwadmin'), { admin: true });
    const target = await env().userWithPassword('pwtarget', 'first password 1');
    const other = await env().userWithPassword('pwother', 'other password 1');
    const helpdeskName = uniqueName('helpdesk');
    const helpdesk = await g.user(helpdeskName);
    await g.accepted(admin);
    await g.accepted(helpdesk);

    // An admin sets it; the user's Login sessions end (its keys for automation stay), the new
    // password works.
    const session = (await signIn(target, 'first password 1')).json;
    const automation = uniqueName('automation');
    await g.key({ user: target, type: 'User' }, automation);
    const byAdmin = await setPassword(target, { password: 'set by admin 1' }, admin);
    expect(byAdmin.status, byAdmin.text).toBe(200);
    expect(byAdmin.json).toMatchObject({ kind: 'Status', status: 'Success' });
    expect(await env().storedKey(session.keyName)).toBeUndefined();
    expect((await env().storedKey(automation))?.metadata.name).toBe(automation);
    expect((await signIn(target, 'first password 1')).status).toBe(401);
    expect((await signIn(target, 'set by admin 1')).status).toBe(200);

    // Anyone else needs RBAC's update on users/password of that user.
    const refused = await setPassword(target, { password: 'set by helpdesk 1' }, helpdesk);
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ kind: 'Status', reason: 'Forbidden' });
    await g.rbac.createClusterRole({
      body: {
        metadata: { name: helpdeskName },
        rules: [
          {
            apiGroups: ['management.platform'],
            resources: ['users/password'],
            resourceNames: [target],
            verbs: ['update'],
          },
        ],
      },
    });
    await g.rbac.createClusterRoleBinding({
      body: {
        metadata: { name: helpdeskName },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: helpdeskName },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: helpdeskName }],
      },
    });
    expect((await setPassword(target, { password: 'set by helpdesk 1' }, helpdesk)).status).toBe(200);
    expect((await setPassword(other, { password: 'set by helpdesk 2' }, helpdesk)).status).toBe(403);
    expect((await signIn(other, 'other password 1')).status).toBe(200);

    // A user changes its own with the old password; without it, or for someone else, no.
    const own = (await signIn(target, 'set by helpdesk 1')).json.key as string;
    await g.accepted(own);
    const wrongOld = await setPassword(target, { oldPassword: 'not it', password: 'mine now 1' }, own);
    expect(wrongOld.status).toBe(401);
    expect((await setPassword(target, { password: 'mine now 1' }, own)).status).toBe(403);
    expect(
      (await setPassword(other, { oldPassword: 'other password 1', password: 'x'.repeat(12) }, own)).status,
    ).toBe(403);
    const tooShort = await setPassword(target, { oldPassword: 'set by helpdesk 1', password: 'short' }, own);
    expect(tooShort.status).toBe(422);
    expect(tooShort.json.details.causes[0].field).toBe('password');
    const changed = await setPassword(
      target,
      { oldPassword: 'set by helpdesk 1', password: 'mine now 1' },
      own,
    );
    expect(changed.status).toBe(200);
    // Every Login session ends, the one that asked included; keys for automation stay.
    expect(await env().loginKeys(target)).toEqual([]);
    expect((await env().storedKey(automation))?.metadata.name).toBe(automation);
    expect((await signIn(target, 'mine now 1')).status).toBe(200);
    // No password was echoed anywhere in those answers.
    for (const answer of [byAdmin, refused, wrongOld, tooShort, changed])
      expect(answer.text).not.toMatch(/set by admin|set by helpdesk|mine now|short"/);
  });

  it('POST /auth/password/change takes the old password, without a key, and ends the Login sessions', async () => {
    await env().configure('');
    const name = await env().userWithPassword('changer', 'changer password 1');
    // Each attempt from an address of its own: the failures here are not to block anyone else.
    const from = (n: number) => ({ 'x-forwarded-for': `198.51.100.${40 + n}` });
    const session = (await signIn(name, 'changer password 1', from(1))).json;
    const change = (oldPassword: string, newPassword: string) =>
      post(
        '/auth/password/change',
        { username: name, oldPassword, newPassword },
        {
          headers: from(0),
        },
      );
    const wrongOld = await change('not the old one', 'changed password 1');
    expect(wrongOld.status, wrongOld.text).toBe(401);
    expect((await signIn(name, 'changer password 1', from(2))).status).toBe(200);
    const changed = await change('changer password 1', 'changed password 1');
    expect(changed.status, changed.text).toBe(200);
    expect(changed.text).not.toContain('changed password 1');
    expect(await env().loginKeys(name)).toEqual([]);
    expect(await env().storedKey(session.keyName)).toBeUndefined();
    expect((await signIn(name, 'changer password 1', from(3))).status).toBe(401);
    expect((await signIn(name, 'changed password 1', from(4))).status).toBe(200);
  });

  it('is out of reach of a key whose scope does not cover it', async () => {
    await env().configure('auth: { customHttpHeaders: { X-Frame-Policy: sso-only } }');
    const g = env().gateway;
    const target = await env().userWithPassword('scoped', 'scoped password 1');
    const narrow = await g.user(uniqueName('narrowadmin'), {
      admin: true,
      keySpec: { scope: { projects: [{ project: 'some-project' }] } },
    });
    await g.accepted(narrow).catch(() => {});
    const answer = await setPassword(target, { password: 'not allowed 1' }, narrow);
    expect(answer.status).toBe(403);
    expectAuthHeaders(answer, "the key's scope refusing");
    // Refused by the key's scope (the gateway's check of users/password), not by RBAC: its user is an admin.
    expect(answer.json.message).toContain(`users/password.management.platform "${target}" is forbidden`);
    expect((await signIn(target, 'scoped password 1')).status).toBe(200);
  });
});
