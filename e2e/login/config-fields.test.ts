import { describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { uniqueName } from '../support/cluster.ts';
import { useLoginEnv } from './support/login-env.ts';
import {
  browserFor,
  callbackFor,
  oidcSection,
  registerSamlServiceProvider,
  samlSection,
  samlSignIn,
  signIn,
  storedUser,
} from './support/sign-in.ts';

/**
 * Fields of the sign-in configuration whose effect no other test showed, through the gateway's
 * login endpoints against a real OpenID provider (oidc-provider) and SAML identity provider
 * (samlify): OIDC `scopes` when empty (spec row 114), OIDC `type` as the name on the login page
 * (row 116), SAML `allowedGroups` and `filterGroups` (row 124).
 */

const env = useLoginEnv();

/** The login page's sign-in link of connector `id`: its text. */
async function loginLinkText(id: string): Promise<string | undefined> {
  const page = await browserFor(env()).request(`${env().platformUrl}/auth/login`);
  expect(page.status, page.text).toBe(200);
  return new RegExp(`<a class="method" id="login-${id}" [^>]*>([^<]*)</a>`).exec(page.text)?.[1];
}

describe('OIDC scopes when none are configured (row 114)', () => {
  it.each([
    { name: 'the field left out', scopes: '' },
    { name: 'an empty list', scopes: '    scopes: []' },
  ])(
    'asks for openid, email and profile, and the person gets the claims they carry: $name',
    async ({ scopes }) => {
      const { oidc } = env();
      const account = uniqueName('scoped');
      oidc.accounts.set(account, {
        claims: {
          preferred_username: `${account}-p`,
          email: `${account}@example.com`,
          email_verified: true,
          groups: ['team-never-asked'],
        },
      });
      await env().configure(`
auth:
${oidcSection(env())}
${scopes}
`);
      const page = await signIn(env(), 'oidc', account);
      expect(page.status, page.text).toBe(200);
      expect(page.authorizeUrl.searchParams.get('scope')?.split(' ').sort()).toEqual([
        'email',
        'openid',
        'profile',
      ]);
      // The provider hands out the claims of the scopes asked for: email, and the profile's
      // preferred_username as the username; the groups of a scope not asked for do not arrive.
      const username = `${account}-p`;
      const [key] = await env().loginKeys(userNameFor(username));
      expect(key?.spec.identity).toMatchObject({
        userId: account,
        username,
        email: `${account}@example.com`,
        groups: [],
      });
      expect((await storedUser(env(), username))?.spec.email).toBe(`${account}@example.com`);
    },
  );
});

describe('OIDC type (row 116)', () => {
  it('names the sign-in on the login page when no displayName does, for the section and for a connector', async () => {
    const { oidc } = env();
    await env().configure(`
auth:
${oidcSection(env())}
    type: Keycloak
  connectors:
    - id: corporate
      oidc:
        issuerUrl: ${oidc.issuer}
        clientId: ${oidc.clientId}
        clientSecret: ${oidc.clientSecret}
        redirectURI: ${env().platformUrl}/auth/corporate/callback
        caFile: ${oidc.caFile}
        type: Dex
    - id: named
      displayName: Staff directory
      oidc:
        issuerUrl: ${oidc.issuer}
        clientId: ${oidc.clientId}
        clientSecret: ${oidc.clientSecret}
        redirectURI: ${env().platformUrl}/auth/named/callback
        caFile: ${oidc.caFile}
        type: Dex
`);
    expect(await loginLinkText('oidc')).toBe('Sign in with Keycloak');
    expect(await loginLinkText('corporate')).toBe('Sign in with Dex');
    expect(await loginLinkText('named')).toBe('Sign in with Staff directory');
    // Display only: the sign-in through it is an OIDC sign-in like any other.
    const account = uniqueName('typed');
    oidc.accounts.set(account, { claims: { preferred_username: account } });
    const { callback } = await callbackFor(env(), browserFor(env()), 'oidc', account);
    expect(new URL(callback).pathname).toBe('/auth/oidc/callback');
  });
});

describe('SAML allowedGroups and filterGroups (row 124)', () => {
  async function configureSaml(fields: string) {
    const { saml } = env();
    await env().configure(`
auth:
${samlSection(env())}
    ssoIssuer: ${saml.entityId}
    usernameAttr: uid
    groupsAttr: memberOf
    groupsDelim: ','
${fields}
`);
    registerSamlServiceProvider(env(), 'saml');
  }
  function samlAccount(memberOf: string): string {
    const account = uniqueName('samlgroups');
    env().saml.accounts.set(account, { nameID: `${account}-id`, attributes: { uid: account, memberOf } });
    return account;
  }

  it('admits only members of an allowed group, with all their groups, or only the allowed ones with filterGroups', async () => {
    await configureSaml('    allowedGroups: [team-a, team-x]');
    const member = samlAccount('team-a,team-b');
    const admitted = await samlSignIn(env(), 'saml', member);
    expect(admitted.status, admitted.text).toBe(200);
    expect((await env().loginKeys(member))[0]?.spec.identity.groups).toEqual(['team-a', 'team-b']);

    const outsider = samlAccount('team-b,team-c');
    const refused = await samlSignIn(env(), 'saml', outsider);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('you are not a member of any group allowed to sign in here');
    expect(refused.key).toBeUndefined();
    expect(await env().loginKeys(outsider)).toEqual([]);
    expect(await storedUser(env(), outsider)).toBeUndefined();

    await configureSaml('    allowedGroups: [team-a, team-x]\n    filterGroups: true');
    const filtered = samlAccount('team-b,team-a,team-c');
    expect((await samlSignIn(env(), 'saml', filtered)).status).toBe(200);
    expect((await env().loginKeys(filtered))[0]?.spec.identity.groups).toEqual(['team-a']);
  });
});
