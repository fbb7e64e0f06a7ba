import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  kubeconfigPath,
  loginWithBrowser,
  loginWithPassword,
  logout,
  withLoginContext,
} from '../../src/cli/login.ts';
import { uniqueName } from '../support/cluster.ts';
import { useLoginEnv } from './support/login-env.ts';
import { oidcSection } from './support/sign-in.ts';

/**
 * `platform login` and `platform logout`: a password sign-in and a browser sign-in (chromium
 * plays the person's browser, the key comes back to the loopback listener), the kubeconfig
 * context that points at the gateway and works, and logout deleting the Login key.
 */

const env = useLoginEnv();

describe('platform login / logout', () => {
  it('--password writes a working context; logout deletes the key', async () => {
    await env().configure('');
    const name = await env().userWithPassword('cli', 'cli password 123');
    const tls = { caFile: env().caFile };
    const signedIn = await loginWithPassword(env().platformUrl, name, 'cli password 123', tls);
    expect(signedIn.server).toBe(env().gateway.base);
    const path = join(mkdtempSync(join(tmpdir(), 'kubeconfig-')), 'config');
    const { writeFileSync } = await import('node:fs');
    writeFileSync(path, JSON.stringify(withLoginContext(undefined, 'platform-test', signedIn, tls)));
    const config = parseYaml(readFileSync(path, 'utf8'));
    expect(config['current-context']).toBe('platform-test');
    expect(config.clusters[0].cluster.server).toBe(env().gateway.base);
    expect((await env().use(config.users[0].user.token, '/ownedaccesskeys')).status).toBe(200);
    expect(await env().loginKeys(name)).toHaveLength(1);
    await logout(path, undefined, tls);
    expect(await env().loginKeys(name)).toEqual([]);
    expect(parseYaml(readFileSync(path, 'utf8')).contexts).toEqual([]);
    await expect(loginWithPassword(env().platformUrl, name, 'wrong', tls)).rejects.toThrow(
      'wrong username or password',
    );
    expect(kubeconfigPath('/x')).toBe('/x');
  });

  it('signs in through the browser and receives the key on the loopback listener', async () => {
    const { oidc } = env();
    const account = uniqueName('cliuser');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    await env().configure(`
auth:
  password: { disabled: true }
${oidcSection(env())}
`);
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: ['--no-sandbox'],
    });
    try {
      const page = await browser.newPage({ ignoreHTTPSErrors: true });
      const signedIn = await loginWithBrowser(env().platformUrl, async (url) => {
        await page.goto(url);
        await page.click('#login-oidc');
        await page.fill('input[name="username"]', account);
        await page.click('button[type="submit"]');
      });
      expect(signedIn.user).toBe(account);
      await page.waitForSelector('text=You can close this window');
      expect((await env().use(signedIn.key, '/ownedaccesskeys')).status).toBe(200);
    } finally {
      await browser.close();
    }
  });
});
