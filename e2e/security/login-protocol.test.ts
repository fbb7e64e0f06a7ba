import { describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { type Answer, call } from '../gateway/support.ts';
import type { ScriptedAgent } from '../login/support/browse.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import {
  browserFor,
  callbackFor,
  keyOn,
  oidcSection,
  registerSamlServiceProvider,
  samlSection,
  signIn,
  storedUser,
} from '../login/support/sign-in.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Attacks on sign-in, made as an attacker would, through the gateway's login endpoints, against a
 * real OpenID provider (oidc-provider), a SAML identity provider (samlify) and the platform's
 * apiserver: each is refused at the HTTP level with a clear error page (or a `Status` for JSON
 * clients), and mints no key.
 */

const env = useLoginEnv({
  throttle: {
    perSource: { failures: 6, windowSeconds: 600, blockSeconds: 600 },
    perUser: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
    perDevice: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
  },
});

const OIDC_COOKIE = 'platform_login_oidc';

async function configureOidc(extra = '', authExtra = '') {
  await env().configure(`
auth:
${authExtra}
${oidcSection(env())}
    scopes: [profile, groups]
${extra}
`);
}

function account(claims: Record<string, unknown> = {}) {
  const name = uniqueName('victim');
  env().oidc.accounts.set(name, { claims: { preferred_username: name, ...claims } });
  return name;
}

/** The platform's answer to a refused sign-in in a browser: the error page with its reason, no key. */
function expectErrorPage(page: { status: number; text: string }, status: number, reason: RegExp | string) {
  expect(page.status, page.text).toBe(status);
  expect(page.text).toContain('<h1>Sign-in failed</h1>');
  expect(/<p class="error" role="alert" id="error">([^<]*)<\/p>/.exec(page.text)?.[1]).toMatch(reason);
  expect(keyOn(page.text)).toBeUndefined();
}

/** Nothing was minted for `username`: no Login key, no User. */
async function expectNothingFor(username: string) {
  expect(await env().loginKeys(userNameFor(username))).toEqual([]);
  expect(await storedUser(env(), username)).toBeUndefined();
}

describe('OIDC attacks', () => {
  it('refuses a replayed authorization code', async () => {
    await configureOidc();
    const name = account();
    const agent = browserFor(env());
    const { callback } = await callbackFor(env(), agent, 'oidc', name);
    const sealed = agent.cookie(env().platformUrl, OIDC_COOKIE) as string;
    expect(keyOn((await agent.request(callback)).text)).toMatch(/^pak_/);
    // The first use cleared the sealed state: the same callback again has no sign-in to finish.
    const before = env().oidc.tokenRequests.length;
    expectErrorPage(await agent.request(callback), 400, /sign-in state is missing/);
    expect(env().oidc.tokenRequests.length).toBe(before);
    // With a copy of the cookie the replay reaches the provider, which refuses the spent code.
    agent.setCookie(env().platformUrl, OIDC_COOKIE, sealed);
    expectErrorPage(await agent.request(callback), 401, /the provider answered invalid_grant/);
    expect(env().oidc.tokenRequests.slice(before)).toEqual(['400']);
    expect(await env().loginKeys(name)).toHaveLength(1);
  });

  it('refuses a callback whose state is not the one this browser started with', async () => {
    await configureOidc();
    const name = account();
    const before = env().oidc.tokenRequests.length;
    const agent = browserFor(env());
    const { callback } = await callbackFor(env(), agent, 'oidc', name);
    const forged = new URL(callback);
    forged.searchParams.set('state', 'attacker-state');
    expectErrorPage(await agent.request(forged.toString()), 401, /state of the callback does not match/);
    // Login CSRF: the attacker's own callback (its code, its state) in a victim's browser that
    // started a sign-in of its own.
    const attacker = browserFor(env());
    const attackerCallback = (await callbackFor(env(), attacker, 'oidc', name)).callback;
    const victim = browserFor(env());
    await victim.request(`${env().platformUrl}/auth/oidc/login`);
    expectErrorPage(await victim.request(attackerCallback), 401, /state of the callback does not match/);
    // Nothing was redeemed at the provider; nothing minted.
    expect(env().oidc.tokenRequests.length).toBe(before);
    await expectNothingFor(name);
  });

  it('refuses an ID token with another nonce or for another audience', async () => {
    await configureOidc();
    const name = account();
    try {
      env().oidc.tamper = { nonce: 'replayed-nonce' };
      expectErrorPage(await signIn(env(), 'oidc', name), 401, /claim of the ID token .* does not match/);
      env().oidc.tamper = { audience: 'another-client' };
      expectErrorPage(await signIn(env(), 'oidc', name), 401, /claim of the ID token .* does not match/);
    } finally {
      env().oidc.tamper = undefined;
    }
    await expectNothingFor(name);
    // The same sign-in, untampered, goes through: the refusals were for the tampering alone.
    expect(keyOn((await signIn(env(), 'oidc', name)).text)).toMatch(/^pak_/);
  });

  it('refuses a person in none of `groups`, and an unknown person with disableUserCreation', async () => {
    const outsider = account({ groups: ['everyone'] });
    await configureOidc('    groups: [team-dev]');
    expectErrorPage(
      await signIn(env(), 'oidc', outsider),
      403,
      'you are not a member of any group allowed to sign in here',
    );
    await expectNothingFor(outsider);
    const stranger = account({ groups: ['team-dev'] });
    await configureOidc('', '  disableUserCreation: true');
    expectErrorPage(await signIn(env(), 'oidc', stranger), 403, /does not create users at sign-in/);
    await expectNothingFor(stranger);
  });
});

describe('SAML attacks', () => {
  /** A SAML sign-in started at the platform in `agent`: the AuthnRequest's id, as the IdP read it. */
  async function started(agent: ScriptedAgent): Promise<string> {
    const start = await agent.request(`${env().platformUrl}/auth/saml/login`);
    expect(start.status, start.text).toBe(303);
    expect((await agent.request(start.location as string)).status).toBe(200);
    return env().saml.requests.at(-1)?.id as string;
  }
  const post = (agent: ScriptedAgent, response: string) =>
    agent.request(`${env().samlCallback}`, { method: 'POST', form: { SAMLResponse: response } });

  it('refuses unsigned, tampered, expired, misaddressed and unsolicited assertions', async () => {
    const { saml } = env();
    await env().configure(`
auth:
${samlSection(env())}
    insecureSkipSignatureValidation: true
`);
    registerSamlServiceProvider(env(), 'saml');
    const name = uniqueName('samlvictim');
    saml.accounts.set(name, { nameID: name, attributes: {} });
    const agent = browserFor(env());
    const inResponseTo = await started(agent);
    const refused = async (response: string, reason: RegExp) =>
      expectErrorPage(await post(agent, response), 401, reason);
    const invalid = /SAML response was refused \(signature, issuer, audience or validity\)/;
    await refused(await saml.issue({ inResponseTo, account: name, unsigned: true }), invalid);
    const signed = Buffer.from(await saml.issue({ inResponseTo, account: name }), 'base64').toString();
    await refused(Buffer.from(signed.replace(`>${name}<`, '>admin<'), 'utf8').toString('base64'), invalid);
    await refused(await saml.issue({ inResponseTo, account: name, expired: true }), invalid);
    await refused(
      await saml.issue({ inResponseTo, account: name, audience: 'https://other-sp.example' }),
      invalid,
    );
    await refused(
      await saml.issue({ inResponseTo, account: name, destination: 'https://other-sp.example/acs' }),
      /addressed to another destination/,
    );
    await refused(
      await saml.issue({ inResponseTo: '_someone-elses-request', account: name }),
      /does not answer the sign-in started in this browser/,
    );
    await expectNothingFor(name);
    // A valid response without the sign-in's sealed state (another browser, an IdP-initiated post).
    expectErrorPage(
      await post(browserFor(env()), await saml.issue({ inResponseTo, account: name })),
      400,
      /sign-in state is missing/,
    );
    await expectNothingFor(name);
    // The same response, well formed, in the browser that started: the refusals were for their defect.
    const page = await post(agent, await saml.issue({ inResponseTo, account: name }));
    expect(page.status, page.text).toBe(200);
    expect(keyOn(page.text)).toMatch(/^pak_/);
    expect(await env().loginKeys(name)).toHaveLength(1);
  });
});

describe('password guessing', () => {
  const passwordLogin = (
    username: string,
    password: string,
    source: string,
    extra: Record<string, string> = {},
  ): Promise<Answer> =>
    call(`${env().platformUrl}/auth/password/login`, {
      method: 'POST',
      body: JSON.stringify({ username, password, ...extra }),
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-forwarded-for': source },
      dispatcher: env().gateway.dispatcher,
    });
  const passwordForm = (username: string, password: string, source: string) =>
    call(`${env().platformUrl}/auth/password/login`, {
      method: 'POST',
      body: new URLSearchParams({ username, password }).toString(),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'text/html,*/*;q=0.8',
        'x-forwarded-for': source,
      },
      dispatcher: env().gateway.dispatcher,
    });
  const expectStatus = (answer: Answer, code: number, reason: string, message: RegExp | string) => {
    expect(answer.status, answer.text).toBe(code);
    expect(answer.json).toMatchObject({ kind: 'Status', status: 'Failure', code, reason });
    expect(answer.json.message).toMatch(message);
    expect(answer.json.key).toBeUndefined();
  };

  it('is refused with a clear answer, throttled per user and per source, without locking the real user out of its device', async () => {
    await env().configure('');
    const name = await env().userWithPassword('target', 'the real password');
    const real = await passwordLogin(name, 'the real password', '192.0.2.1');
    expect(real.status).toBe(200);
    const keysBefore = (await env().loginKeys(name)).length;

    expectStatus(
      await passwordLogin(name, '123456', '198.51.100.7'),
      401,
      'Unauthorized',
      'wrong username or password',
    );
    expectStatus(
      await passwordLogin(name, 'password', '198.51.100.7'),
      401,
      'Unauthorized',
      'wrong username or password',
    );
    // A browser's form gets the error page.
    expectErrorPage(await passwordForm(name, 'qwerty', '198.51.100.7'), 401, 'wrong username or password');
    // Blocked now, even with the right password, from the attacker's source and from a fresh one.
    for (const source of ['198.51.100.7', '203.0.113.9']) {
      const blocked = await passwordLogin(name, 'the real password', source);
      expectStatus(blocked, 429, 'TooManyRequests', /too many/i);
      expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect((await env().loginKeys(name)).length).toBe(keysBefore);
    // The real user, with the device token of its earlier sign-in, still gets in.
    const again = await passwordLogin(name, 'the real password', '198.51.100.7', {
      deviceToken: real.json.deviceToken,
    });
    expect(again.status, again.text).toBe(200);
    expect((await env().loginKeys(name)).length).toBe(keysBefore + 1);

    // One source guessing many users is stopped too, for a user nobody guessed at; elsewhere that
    // user still gets in.
    const bystander = await env().userWithPassword('bystander', 'bystander password 1');
    for (let i = 0; i < 6; i++)
      expect((await passwordLogin(`nobody-${i}`, 'guess-guess', '198.51.100.99')).status).toBe(401);
    expectStatus(
      await passwordLogin(bystander, 'bystander password 1', '198.51.100.99'),
      429,
      'TooManyRequests',
      /too many/i,
    );
    expect(await env().loginKeys(bystander)).toEqual([]);
    expect((await passwordLogin(bystander, 'bystander password 1', '192.0.2.2')).status).toBe(200);
  });

  it('is refused, with no form on the login page, when password login is disabled', async () => {
    await env().configure('');
    const name = await env().userWithPassword('disabled', 'a fine password 1');
    await env().configure('auth: { password: { disabled: true } }');
    const page = await call(`${env().platformUrl}/auth/login`, { dispatcher: env().gateway.dispatcher });
    expect(page.status).toBe(200);
    expect(page.text).not.toContain('password-form');
    expectStatus(
      await passwordLogin(name, 'a fine password 1', '192.0.2.44'),
      403,
      'Forbidden',
      'signing in with a password is disabled on this platform',
    );
    expectErrorPage(
      await passwordForm(name, 'a fine password 1', '192.0.2.44'),
      403,
      'signing in with a password is disabled on this platform',
    );
    expect(await env().loginKeys(name)).toEqual([]);
  });
});
