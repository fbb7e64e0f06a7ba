import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliPublicKey, sealForCli, verificationCode } from '../login/cli-handoff.ts';
import { browserOpener } from './login/browser-opener.ts';
import { CodeRefused, openCode, signInKeys, signInUrl } from './login/browser-sign-in.ts';
import { deviceTokenFor, deviceTokensPath, keepDeviceToken } from './login/password.ts';

const URL_WITH_QUERY = 'https://platform.example/auth/login?cli=abc&return=http%3A%2F%2F127.0.0.1%3A5000%2F';

describe('browserOpener', () => {
  it('opens with xdg-open where there is a display, and not at all without one', () => {
    expect(browserOpener('https://x', 'linux', { DISPLAY: ':0' })).toEqual({
      command: 'xdg-open',
      args: ['https://x'],
    });
    expect(browserOpener('https://x', 'linux', { WAYLAND_DISPLAY: 'wayland-0' })?.command).toBe('xdg-open');
    expect(browserOpener('https://x', 'linux', {})).toBeUndefined();
    expect(browserOpener('https://x', 'freebsd', { SSH_CONNECTION: '1 2 3 4' })).toBeUndefined();
  });

  it("uses macOS's open and Windows' start, unless the terminal is a remote shell", () => {
    expect(browserOpener('https://x', 'darwin', {})).toEqual({ command: 'open', args: ['https://x'] });
    expect(browserOpener('https://x', 'darwin', { SSH_TTY: '/dev/ttys001' })).toBeUndefined();
    expect(browserOpener(URL_WITH_QUERY, 'win32', { ComSpec: 'C:\\Windows\\system32\\cmd.exe' })).toEqual({
      command: 'C:\\Windows\\system32\\cmd.exe',
      // cmd.exe would end the command at an unescaped `&`.
      args: ['/d', '/c', 'start', '""', URL_WITH_QUERY.replace('&', '^&')],
      windowsVerbatimArguments: true,
    });
    expect(browserOpener('https://x', 'win32', { SSH_CONNECTION: '1 2 3 4' })).toBeUndefined();
  });

  it('prefers BROWSER, with %s for the URL or the URL last', () => {
    expect(browserOpener('https://x', 'linux', { BROWSER: 'firefox --new-tab', DISPLAY: ':0' })).toEqual({
      command: 'firefox',
      args: ['--new-tab', 'https://x'],
    });
    expect(browserOpener('https://x', 'linux', { BROWSER: 'w3m:lynx' })).toEqual({
      command: 'w3m',
      args: ['https://x'],
    });
    expect(browserOpener('https://x', 'darwin', { BROWSER: 'open -a Safari %s', SSH_TTY: 'x' })).toEqual({
      command: 'open',
      args: ['-a', 'Safari', 'https://x'],
    });
  });
});

describe('the code of a browser sign-in', () => {
  const handoff = {
    key: 'pak_key',
    keyName: 'login-abc',
    user: 'alice',
    server: 'https://platform.example/kubernetes/management',
  };

  it('opens with the key pair of this sign-in only', async () => {
    const keys = await signInKeys('https://platform.example');
    expect(cliPublicKey(keys.publicKey)).toBe(keys.publicKey);
    expect(keys.verification).toBe(verificationCode(keys.publicKey));
    expect(keys.verification).toMatch(/^[A-Z2-7]{4}-[A-Z2-7]{4}$/);
    const code = await sealForCli(keys.publicKey, handoff);
    expect(code).not.toContain('pak_key');
    // Pasted with the line breaks a terminal may add.
    expect(await openCode(`${code.slice(0, 40)}\n${code.slice(40)} `, keys)).toEqual(handoff);
    const other = await signInKeys('https://platform.example');
    await expect(openCode(code, other)).rejects.toBeInstanceOf(CodeRefused);
    await expect(openCode(code.slice(0, -4), keys)).rejects.toBeInstanceOf(CodeRefused);
    await expect(openCode('', keys)).rejects.toBeInstanceOf(CodeRefused);
  });

  it('refuses a code naming another server: anyone who saw the URL can seal one', async () => {
    const keys = await signInKeys('https://platform.example');
    const forged = await sealForCli(keys.publicKey, {
      ...handoff,
      server: 'https://evil.example/kubernetes/management',
    });
    await expect(openCode(forged, keys)).rejects.toThrow(/another server than https:\/\/platform\.example/);
    const garbled = await sealForCli(keys.publicKey, { ...handoff, server: 'not a url' });
    await expect(openCode(garbled, keys)).rejects.toBeInstanceOf(CodeRefused);
  });

  it('is asked for with the public key, and the loopback address when there is one', async () => {
    const keys = await signInKeys('https://platform.example');
    const remote = new URL(signInUrl('https://platform.example/', keys));
    expect(remote.pathname).toBe('/auth/login');
    expect(Object.fromEntries(remote.searchParams)).toEqual({ cli: keys.publicKey });
    const local = new URL(
      signInUrl('https://platform.example', keys, 'http://127.0.0.1:1234/callback?state=s'),
    );
    expect(local.searchParams.get('return')).toBe('http://127.0.0.1:1234/callback?state=s');
  });

  it('takes only well-formed public keys', () => {
    expect(cliPublicKey('short')).toBeUndefined();
    expect(cliPublicKey(`${'A'.repeat(42)}=`)).toBeUndefined();
    expect(cliPublicKey(null)).toBeUndefined();
  });
});

describe('device tokens of password sign-ins', () => {
  it('live in the config directory, XDG_CONFIG_HOME first', () => {
    expect(deviceTokensPath({ XDG_CONFIG_HOME: '/x/conf', HOME: '/home/p' })).toBe(
      '/x/conf/platform/device-tokens.json',
    );
    expect(deviceTokensPath({ XDG_CONFIG_HOME: '' })).toMatch(/\/\.config\/platform\/device-tokens\.json$/);
  });

  it('are kept by platform origin and username, readable by the owner only, others kept', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'device-tokens-')), 'platform', 'device-tokens.json');
    expect(deviceTokenFor(path, 'https://a.example', 'alice')).toBeUndefined();
    keepDeviceToken(path, 'https://a.example/some/path', 'alice', 'token-a');
    keepDeviceToken(path, 'https://b.example', 'alice', 'token-b');
    keepDeviceToken(path, 'https://a.example', 'bob', 'token-c');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(path, '..')).mode & 0o777).toBe(0o700);
    expect(deviceTokenFor(path, 'https://a.example', 'alice')).toBe('token-a');
    expect(deviceTokenFor(path, 'https://b.example/', 'alice')).toBe('token-b');
    expect(deviceTokenFor(path, 'https://a.example', 'bob')).toBe('token-c');
    expect(deviceTokenFor(path, 'https://a.example:8443', 'alice')).toBeUndefined();
    keepDeviceToken(path, 'https://a.example', 'alice', 'token-a2');
    expect(deviceTokenFor(path, 'https://a.example', 'alice')).toBe('token-a2');
    expect(deviceTokenFor(path, 'https://a.example', 'bob')).toBe('token-c');
    // A file that is no token list is read as none, and replaced when a token is kept.
    writeFileSync(path, 'not json');
    expect(deviceTokenFor(path, 'https://a.example', 'alice')).toBeUndefined();
    keepDeviceToken(path, 'https://a.example', 'alice', 'token-a3');
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({ 'https://a.example': { alice: 'token-a3' } });
  });
});
