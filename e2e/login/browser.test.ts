import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueName } from '../support/cluster.ts';
import { launchChromium } from './support/browse.ts';
import { useLoginEnv } from './support/login-env.ts';
import { oidcSection, registerSamlServiceProvider, samlSection } from './support/sign-in.ts';

/**
 * Signing in as a person does: chromium (the machine's, or the one hack/chromium/install.sh brings),
 * headless, driven by playwright-core, through the login page, the whole OIDC redirect dance with a
 * real OpenID provider (oidc-provider), the SAML identity provider's cross-site POST back to the
 * platform, and the password form; screenshots go to e2e/login/artifacts/ (git-ignored), each
 * checked to be written by this run. The login endpoints are
 * served by the real gateway over HTTPS (its test CA is not the browser's, hence ignoreHTTPSErrors),
 * composed as the operator composes them.
 */

const ARTIFACTS = join(import.meta.dirname, 'artifacts');
const env = useLoginEnv();
let browser: Browser | undefined;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** A screenshot of `page` in the artifacts, checked to be a PNG this run wrote. */
async function screenshot(page: Page, name: string) {
  const path = join(ARTIFACTS, name);
  rmSync(path, { force: true });
  await page.screenshot({ path, fullPage: true });
  expect(readFileSync(path).subarray(0, 8)).toEqual(
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  );
}

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
    await screenshot(page, 'login-page.png');
    await page.click('#login-oidc');
    await page.waitForSelector('input[name="username"]');
    expect(page.url()).toContain(oidc.issuer);
    await page.fill('input[name="username"]', account);
    await page.click('button[type="submit"]');
    await page.waitForSelector('#access-key');
    expect(page.url().startsWith(env().oidcCallback)).toBe(true);
    await screenshot(page, 'signed-in-oidc.png');
    const key = (await page.textContent('#access-key')) ?? '';
    expect(key).toMatch(/^pak_/);
    expect((await env().use(key, '/ownedaccesskeys')).status).toBe(200);
    const cookies = await context.cookies();
    expect(cookies.filter((cookie) => cookie.name.startsWith('platform_login_'))).toEqual([]);
    await context.close();
  });

  it("through SAML: the identity provider's form posts back across sites to the platform", async () => {
    const { saml } = env();
    const account = uniqueName('samlbrowser');
    saml.accounts.set(account, { nameID: account, attributes: {} });
    await env().configure(`
auth:
  password: { disabled: true }
${samlSection(env())}
    ssoIssuer: ${saml.entityId}
`);
    registerSamlServiceProvider(env(), 'saml');
    const context = await (browser as Browser).newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    await page.goto(`${env().platformUrl}/auth/login`);
    expect(await page.locator('#password-form').count()).toBe(0);
    await page.click('#login-saml');
    await page.waitForSelector('input[name="username"]');
    // The identity provider is another site (http, another port): its POST carries the sealed
    // state cookie only because it is SameSite=None.
    expect(page.url().startsWith(saml.ssoUrl)).toBe(true);
    await page.fill('input[name="username"]', account);
    await page.click('button[type="submit"]');
    await page.waitForSelector('#access-key, #error');
    expect(await page.locator('#error').count(), (await page.textContent('body')) ?? '').toBe(0);
    expect(page.url()).toBe(env().samlCallback);
    await screenshot(page, 'signed-in-saml.png');
    const key = (await page.textContent('#access-key')) ?? '';
    expect((await env().use(key, '/ownedaccesskeys')).status).toBe(200);
    expect(await env().loginKeys(account)).toHaveLength(1);
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
    await screenshot(page, 'wrong-password.png');
    expect(await env().loginKeys(name)).toEqual([]);
    await page.goto(`${env().platformUrl}/auth/login`);
    await page.fill('input[name="username"]', name);
    await page.fill('input[name="password"]', 'browser password 1');
    await page.click('#password-form button');
    await page.waitForSelector('#access-key');
    await screenshot(page, 'signed-in-password.png');
    const key = (await page.textContent('#access-key')) ?? '';
    expect((await env().use(key, '/ownedaccesskeys')).status).toBe(200);
    expect(await env().loginKeys(name)).toHaveLength(1);
    await context.close();
  });
});
