import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../support/cluster.ts';
import { useLoginEnv } from './support/login-env.ts';
import { oidcSection } from './support/sign-in.ts';

/**
 * Signing in as a person does: Debian's chromium, headless, driven by playwright-core, through the
 * login page, the whole OIDC redirect dance with a real OpenID provider (oidc-provider), and the
 * password form; screenshots go to e2e/login/artifacts/ (git-ignored). The login endpoints are
 * served by the real gateway over HTTPS (its test CA is not the browser's, hence ignoreHTTPSErrors),
 * composed as the operator composes them.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ARTIFACTS = join(import.meta.dirname, 'artifacts');
const env = useLoginEnv();
let browser: Browser | undefined;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`chromium not found at ${CHROMIUM}: apt-get install -y chromium`);
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
});
afterAll(async () => {
  await browser?.close();
});

describe('signing in with a browser', () => {
  it('through OIDC: login page, provider, callback, and a key that works', async () => {
    const { oidc } = env();
    const account = uniqueName('browser');
    oidc.accounts.set(account, { claims: { preferred_username: account, email: `${account}@example.com` } });
    await env().configure(`
uiSettings:
  legalTemplate: '<p id="legal">By signing in you accept the <b>acceptable use policy</b>.</p>'
auth:
${oidcSection(env())}
    type: Test SSO
  customHttpHeaders: { X-Login-Test: present }
`);
    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const first = await page.goto(`${env().platformUrl}/auth/login`);
    expect(first?.headers()['x-login-test']).toBe('present');
    expect(await page.textContent('#legal')).toContain('acceptable use policy');
    await page.screenshot({ path: join(ARTIFACTS, 'login-page.png'), fullPage: true });
    await page.click('#login-oidc');
    await page.waitForSelector('input[name="username"]');
    expect(page.url()).toContain(oidc.issuer);
    await page.fill('input[name="username"]', account);
    await page.click('button[type="submit"]');
    await page.waitForSelector('#access-key');
    expect(page.url().startsWith(env().oidcCallback)).toBe(true);
    await page.screenshot({ path: join(ARTIFACTS, 'signed-in-oidc.png'), fullPage: true });
    const key = (await page.textContent('#access-key')) ?? '';
    expect(key).toMatch(/^pak_/);
    expect((await env().use(key, '/ownedaccesskeys')).status).toBe(200);
    const cookies = await context.cookies();
    expect(cookies.filter((cookie) => cookie.name.startsWith('platform_login_'))).toEqual([]);
    await context.close();
  });

  it('with the password form, and a clear page for a wrong password', async () => {
    await env().configure('');
    const name = await env().userWithPassword('formuser', 'browser password 1');
    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(`${env().platformUrl}/auth/login`);
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', 'not the password');
    await page.click('#password-form button');
    await page.waitForSelector('#error');
    expect(await page.textContent('#error')).toBe('wrong username or password');
    await page.screenshot({ path: join(ARTIFACTS, 'wrong-password.png'), fullPage: true });
    expect(await env().loginKeys(name)).toEqual([]);
    await page.goto(`${env().platformUrl}/auth/login`);
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', 'browser password 1');
    await page.click('#password-form button');
    await page.waitForSelector('#access-key');
    await page.screenshot({ path: join(ARTIFACTS, 'signed-in-password.png'), fullPage: true });
    const key = (await page.textContent('#access-key')) ?? '';
    expect((await env().use(key, '/ownedaccesskeys')).status).toBe(200);
    expect(await env().loginKeys(name)).toHaveLength(1);
    await context.close();
  });
});
