import { describe, expect, it } from 'vitest';
import { OidcConnector, ProviderLoginFailed } from '../../src/login/oidc.ts';
import { SamlConnector, type SamlTransaction } from '../../src/login/saml.ts';
import { InvalidCredentials, LoginThrottled } from '../../src/login/service.ts';
import { ScriptedAgent } from '../login/support/browse.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import { oidcSection } from '../login/support/sign-in.ts';
import { startRedirect, viaForm, viaUrl } from '../login/support/sso.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Attacks on sign-in, made as an attacker would against a real OpenID provider, a SAML identity
 * provider and the platform's apiserver: each is refused with its own error and mints no key.
 */

const env = useLoginEnv({
  throttle: {
    perSource: { failures: 6, windowSeconds: 600, blockSeconds: 600 },
    perUser: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
    perDevice: { failures: 3, windowSeconds: 600, blockSeconds: 600 },
  },
});

async function configureOidc() {
  await env().configure(`
auth:
${oidcSection(env())}
`);
  return new OidcConnector('oidc', env().config().auth.oidc as never);
}

async function authorize(connector: OidcConnector, account: string) {
  const { url, transaction } = await startRedirect(connector);
  const callback = await new ScriptedAgent([env().oidc.caPem]).followUntil(
    url.toString(),
    env().oidcCallback,
    {
      path: /^\/interaction\//,
      fields: { username: account },
    },
  );
  return { callback: new URL(callback), transaction };
}

function account() {
  const name = uniqueName('victim');
  env().oidc.accounts.set(name, { claims: { preferred_username: name } });
  return name;
}

describe('OIDC attacks', () => {
  it('refuses a replayed authorization code', async () => {
    const connector = await configureOidc();
    const name = account();
    const { callback, transaction } = await authorize(connector, name);
    await env().service.ssoLogin(await connector.finish(viaUrl(callback), transaction));
    const before = env().oidc.tokenRequests.length;
    await expect(connector.finish(viaUrl(callback), transaction)).rejects.toBeInstanceOf(ProviderLoginFailed);
    // The replay reached the provider, which refused the spent code.
    expect(env().oidc.tokenRequests.slice(before)).toEqual(['400']);
    expect(await env().loginKeys(name)).toHaveLength(1);
  });

  it('refuses a callback whose state is not the one this browser started with', async () => {
    const connector = await configureOidc();
    const name = account();
    const { callback, transaction } = await authorize(connector, name);
    const forged = new URL(callback);
    forged.searchParams.set('state', 'attacker-state');
    const before = env().oidc.tokenRequests.length;
    await expect(connector.finish(viaUrl(forged), transaction)).rejects.toThrow(/state/);
    // A login-CSRF callback from another transaction: the attacker's code with the victim's state.
    const other = await authorize(connector, name);
    await expect(connector.finish(viaUrl(other.callback), transaction)).rejects.toBeInstanceOf(
      ProviderLoginFailed,
    );
    expect(env().oidc.tokenRequests.length).toBe(before);
    expect(await env().loginKeys(name)).toEqual([]);
  });

  it('refuses an ID token with another nonce or for another audience', async () => {
    const connector = await configureOidc();
    const name = account();
    try {
      env().oidc.tamper = { nonce: 'replayed-nonce' };
      const first = await authorize(connector, name);
      await expect(connector.finish(viaUrl(first.callback), first.transaction)).rejects.toThrow(
        /nonce|claim/,
      );
      env().oidc.tamper = { audience: 'another-client' };
      const second = await authorize(connector, name);
      await expect(connector.finish(viaUrl(second.callback), second.transaction)).rejects.toThrow(
        /audience|claim/,
      );
    } finally {
      env().oidc.tamper = undefined;
    }
    expect(await env().loginKeys(name)).toEqual([]);
  });
});

describe('SAML attacks', () => {
  it('refuses unsigned, tampered, expired, misaddressed and unsolicited assertions', async () => {
    const { saml } = env();
    await env().configure(`
auth:
  saml:
    redirectURI: ${env().samlCallback}
    ssoURL: ${saml.ssoUrl}
    caData: ${saml.caData}
    insecureSkipSignatureValidation: true
`);
    const connector = new SamlConnector('saml', env().config().auth.saml as never);
    saml.registerServiceProvider(connector.metadata());
    const name = uniqueName('samlvictim');
    saml.accounts.set(name, { nameID: name, attributes: {} });
    const { transaction } = await connector.start();
    const inResponseTo = (transaction as SamlTransaction).requestId;
    const refused = async (response: string) =>
      expect(connector.finish(viaForm({ SAMLResponse: response }), transaction)).rejects.toBeInstanceOf(
        ProviderLoginFailed,
      );
    await refused(await saml.issue({ inResponseTo, account: name, unsigned: true }));
    const signed = Buffer.from(await saml.issue({ inResponseTo, account: name }), 'base64').toString();
    await refused(Buffer.from(signed.replace(`>${name}<`, '>admin<'), 'utf8').toString('base64'));
    await refused(await saml.issue({ inResponseTo, account: name, expired: true }));
    await refused(await saml.issue({ inResponseTo, account: name, audience: 'https://other-sp.example' }));
    await refused(
      await saml.issue({ inResponseTo, account: name, destination: 'https://other-sp.example/acs' }),
    );
    await refused(await saml.issue({ inResponseTo: '_someone-elses-request', account: name }));
    // The same response, well formed, is accepted: the refusals above are for their defect alone.
    expect(
      (
        await connector.finish(
          viaForm({ SAMLResponse: await saml.issue({ inResponseTo, account: name }) }),
          transaction,
        )
      ).userId,
    ).toBe(name);
    expect(await env().loginKeys(name)).toEqual([]);
  });
});

describe('password guessing', () => {
  it('is throttled per user and per source without locking the real user out of its device', async () => {
    const { service } = env();
    await env().configure('');
    const name = await env().userWithPassword('target', 'the real password');
    const real = await service.passwordLogin({
      username: name,
      password: 'the real password',
      source: '192.0.2.1',
    });
    const keysBefore = (await env().loginKeys(name)).length;

    for (const guess of ['123456', 'password', 'qwerty']) {
      await expect(
        service.passwordLogin({ username: name, password: guess, source: '198.51.100.7' }),
      ).rejects.toBeInstanceOf(InvalidCredentials);
    }
    // Blocked now, even with the right password, from the attacker's source and from a fresh one.
    for (const source of ['198.51.100.7', '203.0.113.9']) {
      await expect(
        service.passwordLogin({ username: name, password: 'the real password', source }),
      ).rejects.toBeInstanceOf(LoginThrottled);
    }
    // The real user, with the device token of its earlier sign-in, still gets in.
    const again = await service.passwordLogin({
      username: name,
      password: 'the real password',
      source: '198.51.100.7',
      deviceToken: real.deviceToken,
    });
    expect(again.key).toMatch(/^pak_/);
    expect((await env().loginKeys(name)).length).toBe(keysBefore + 1);

    // One source guessing many users is stopped too.
    for (let i = 0; i < 6; i++) {
      await service
        .passwordLogin({ username: `nobody-${i}`, password: 'guess-guess', source: '198.51.100.99' })
        .catch(() => {});
    }
    await expect(
      service.passwordLogin({ username: name, password: 'the real password', source: '198.51.100.99' }),
    ).rejects.toBeInstanceOf(LoginThrottled);
  });
});
