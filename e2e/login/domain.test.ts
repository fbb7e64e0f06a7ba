import { describe, expect, it } from 'vitest';
import { PLATFORM_CONFIG_KEY, PLATFORM_CONFIG_SECRET } from '../../src/api/config.ts';
import { NotInAllowedGroups } from '../../src/login/identity.ts';
import { UnknownUser } from '../../src/login/outcome.ts';
import { InvalidCredentials, PasswordLoginDisabled } from '../../src/login/service.ts';
import { KubeClient } from '../../src/runtime/kube-client.ts';
import { call } from '../gateway/support.ts';
import { kubectl, uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';
import { useLoginEnv } from './support/login-env.ts';
import { oidcSection, registerSamlServiceProvider, samlSection, samlSignIn } from './support/sign-in.ts';
import { oidcSignIn } from './support/sso.ts';

/**
 * What a sign-in does, against a real apiserver with the platform's admission and gateway, a
 * real OpenID provider (oidc-provider) and a SAML identity provider (samlify): the User and its
 * Teams, the `type: Login` key and its identity, and that the key works through the gateway.
 */

const env = useLoginEnv();

function oidcConfig(extra = '', authExtra = '') {
  return `
auth:
${authExtra}
  groupsFilters: ['^team-']
${oidcSection(env())}
    scopes: [email, profile, groups, extra, offline_access]
    allowedExtraClaims: [department]
${extra}`;
}

describe('password sign-in', () => {
  it('mints a Login key for the right password only, which works through the gateway', async () => {
    const { gateway, service } = env();
    await env().configure('auth: { loginAccessKeyTTLSeconds: 3600 }');
    const name = await env().userWithPassword('pw', 'correct horse battery');
    await expect(
      service.passwordLogin({ username: name, password: 'wrong horse battery', source: '10.0.0.1' }),
    ).rejects.toBeInstanceOf(InvalidCredentials);
    expect(await env().loginKeys(name)).toEqual([]);
    const minted = await service.passwordLogin({
      username: name,
      password: 'correct horse battery',
      source: '10.0.0.1',
    });
    expect(minted.key).toMatch(/^pak_/);
    expect(minted.deviceToken).toBeDefined();
    const keys = await env().loginKeys(name);
    expect(keys.map((k) => k.metadata.name)).toEqual([minted.keyName]);
    expect(keys[0]?.spec).toMatchObject({
      type: 'Login',
      user: name,
      identity: { connector: 'password', username: name },
    });
    expect(keys[0]?.spec.key).toBeUndefined();
    const own = await env().use(minted.key, '/ownedaccesskeys');
    expect(own.status).toBe(200);
    expect(own.json.items.map((k: { metadata: { name: string } }) => k.metadata.name)).toContain(
      minted.keyName,
    );

    // The stored password is a scrypt hash in a Secret, not in the User.
    const secret = await gateway.core.readNamespacedSecret({
      name: `platform-password-${name}`,
      namespace: gateway.platformNamespace,
    });
    expect(Buffer.from(secret.data?.hash ?? '', 'base64').toString()).toMatch(/^\$scrypt\$/);
    const user = await gateway.custom.getClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'users',
      name,
    });
    expect(JSON.stringify(user)).not.toContain('scrypt');

    // A change with the old password ends the Login sessions; the old password stops working.
    await service.changePassword({
      username: name,
      oldPassword: 'correct horse battery',
      newPassword: 'new battery staple',
      source: '10.0.0.1',
    });
    expect(await env().loginKeys(name)).toEqual([]);
    await expect(
      service.passwordLogin({ username: name, password: 'correct horse battery', source: '10.0.0.2' }),
    ).rejects.toBeInstanceOf(InvalidCredentials);
    await service.passwordLogin({ username: name, password: 'new battery staple', source: '10.0.0.2' });
  });

  it("is bound to its User's uid: a User made again under the name has no password until one is set; the key lives 20 days by default", async () => {
    const { gateway, service } = env();
    await env().configure('');
    const name = await env().userWithPassword('again', 'earlier password 1');
    const users = { group: 'management.platform', version: 'v1', plural: 'users' };
    const earlier = (await gateway.custom.getClusterCustomObject({ ...users, name })) as {
      metadata: { uid: string };
    };
    const secret = await gateway.core.readNamespacedSecret({
      name: `platform-password-${name}`,
      namespace: gateway.platformNamespace,
    });
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'User', name, uid: earlier.metadata.uid }),
    ]);
    const minted = await service.passwordLogin({
      username: name,
      password: 'earlier password 1',
      source: '10.0.1.1',
    });
    // Without loginAccessKeyTTLSeconds, a Login key lives 20 days (docs/login.md, "The key").
    await eventually(
      async () => (await env().storedKey(minted.keyName))?.status?.expirationTimestamp !== undefined,
      30_000,
      'the expiry recorded',
    );
    const key = await env().storedKey(minted.keyName);
    expect(
      Date.parse(key?.status?.expirationTimestamp) - Date.parse(key?.metadata.creationTimestamp ?? ''),
    ).toBe(20 * 24 * 3600 * 1000);

    await gateway.custom.deleteClusterCustomObject({ ...users, name });
    await eventually(
      async () =>
        (await gateway.custom.getClusterCustomObject({ ...users, name }).catch(() => null)) === null,
      30_000,
      'the User gone',
    );
    await gateway.custom.createClusterCustomObject({
      ...users,
      body: {
        apiVersion: 'management.platform/v1',
        kind: 'User',
        metadata: { name },
        spec: { username: name },
      },
    });
    // This environment runs no garbage collector: the earlier User's Secret is still there, and
    // its password does not sign the new User in.
    await gateway.core.readNamespacedSecret({
      name: `platform-password-${name}`,
      namespace: gateway.platformNamespace,
    });
    await expect(
      service.passwordLogin({ username: name, password: 'earlier password 1', source: '10.0.1.2' }),
    ).rejects.toBeInstanceOf(InvalidCredentials);
    await service.setPassword(name, 'new user password 1');
    await service.passwordLogin({ username: name, password: 'new user password 1', source: '10.0.1.3' });
  });

  it('is refused when password login is disabled, and an unknown user is refused like a wrong password', async () => {
    const { service } = env();
    await env().configure('auth: { password: { disabled: true } }');
    await expect(
      service.passwordLogin({ username: 'nobody', password: 'whatever123', source: 's' }),
    ).rejects.toBeInstanceOf(PasswordLoginDisabled);
    await env().configure('');
    await expect(
      service.passwordLogin({ username: uniqueName('nobody'), password: 'whatever123', source: 's' }),
    ).rejects.toBeInstanceOf(InvalidCredentials);
  });
});

describe('password sign-in throttling, with the default limits', () => {
  /** A password sign-in through the gateway, from `source` (as the trusted proxy reports it). */
  const signIn = (username: string, password: string, source: string, deviceToken?: string) =>
    call(`${env().platformUrl}/auth/password/login`, {
      method: 'POST',
      body: JSON.stringify({ username, password, ...(deviceToken ? { deviceToken } : {}) }),
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-forwarded-for': source },
      dispatcher: env().gateway.dispatcher,
    });

  it('checks 5 failed attempts per user, then refuses (429 with Retry-After) even the right password', async () => {
    await env().configure('');
    const name = await env().userWithPassword('limited', 'limited password 1');
    for (let i = 1; i <= 5; i++)
      expect((await signIn(name, `wrong guess ${i}`, `198.51.100.${i}`)).status, `guess ${i}`).toBe(401);
    const sixth = await signIn(name, 'wrong guess 6', '198.51.100.6');
    expect(sixth.status).toBe(429);
    expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await signIn(name, 'limited password 1', '198.51.100.7')).status).toBe(429);
  });

  it('checks 5 failed attempts per device token, which are not counted against the user', async () => {
    await env().configure('');
    const name = await env().userWithPassword('device', 'device password 1');
    const first = await signIn(name, 'device password 1', '198.51.100.80');
    expect(first.status, first.text).toBe(200);
    const device = first.json.deviceToken as string;
    expect(device).toBeTruthy();
    for (let i = 1; i <= 5; i++)
      expect(
        (await signIn(name, `wrong guess ${i}`, `198.51.100.${80 + i}`, device)).status,
        `guess ${i}`,
      ).toBe(401);
    expect((await signIn(name, 'wrong guess 6', '198.51.100.86', device)).status).toBe(429);
    expect((await signIn(name, 'device password 1', '198.51.100.87', device)).status).toBe(429);
    // The user's own limit was not touched: without the blocked device, the password still works.
    expect((await signIn(name, 'device password 1', '198.51.100.88')).status).toBe(200);
  });

  it('checks 20 failed attempts per source address, then refuses (429) every sign-in from it', async () => {
    await env().configure('');
    const name = await env().userWithPassword('fromsource', 'source password 1');
    const source = '203.0.113.9';
    // Each guess at another (unknown) user, so that no per-user limit is reached first.
    for (let i = 1; i <= 20; i++)
      expect((await signIn(uniqueName('guess'), 'whatever 123', source)).status, `guess ${i}`).toBe(401);
    expect((await signIn(uniqueName('guess'), 'whatever 123', source)).status).toBe(429);
    expect((await signIn(name, 'source password 1', source)).status).toBe(429);
    expect((await signIn(name, 'source password 1', '203.0.113.10')).status).toBe(200);
  });
});

describe('OIDC sign-in', () => {
  it('creates the user with its filtered groups and teams, and a Login key holding the identity', async () => {
    const { oidc, service, gateway } = env();
    const account = uniqueName('alice');
    oidc.accounts.set(account, {
      claims: {
        preferred_username: account,
        email: `${account}@example.com`,
        email_verified: true,
        groups: ['team-dev', 'everyone'],
        department: 'R&D',
        employee_id: '42',
      },
    });
    await env().configure(oidcConfig());
    const identity = await oidcSignIn(env(), account);
    expect(identity).toMatchObject({
      userId: account,
      username: account,
      groups: ['team-dev', 'everyone'],
      extraClaims: { department: ['R&D'] },
    });
    expect(identity.connectorData).toContain('refreshToken');
    const minted = await service.ssoLogin(identity);

    const user = (await gateway.custom.getClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'users',
      name: account,
    })) as { spec: Record<string, unknown> };
    expect(user.spec).toMatchObject({
      username: account,
      subject: account,
      email: `${account}@example.com`,
      groups: ['team-dev'],
    });
    const team = (await gateway.custom.getClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'teams',
      name: 'team-dev',
    })) as { spec: Record<string, unknown> };
    expect(team.spec).toMatchObject({ groups: ['team-dev'], users: [account] });

    const [key] = await env().loginKeys(account);
    expect(key?.spec.identity).toMatchObject({
      connector: 'oidc',
      userId: account,
      extraClaims: { department: ['R&D'] },
    });
    expect(key?.spec.identity.extraClaims.employee_id).toBeUndefined();
    const own = await env().use(minted.key, '/ownedaccesskeys');
    expect(own.status).toBe(200);
    const listed = own.json.items.find(
      (k: { metadata: { name: string } }) => k.metadata.name === minted.keyName,
    );
    expect(listed.spec.identity.connector).toBe('oidc');
    expect(listed.spec.identity.connectorData).toBeUndefined();
  });

  it('refuses a user in none of `groups`, and an unknown user with disableUserCreation, minting nothing', async () => {
    const { oidc } = env();
    const account = uniqueName('mallory');
    oidc.accounts.set(account, { claims: { preferred_username: account, groups: ['everyone'] } });
    await env().configure(oidcConfig('    groups: [team-dev]'));
    await expect(oidcSignIn(env(), account)).rejects.toBeInstanceOf(NotInAllowedGroups);
    await env().configure(oidcConfig('', '  disableUserCreation: true'));
    const identity = await oidcSignIn(env(), account);
    await expect(env().service.ssoLogin(identity)).rejects.toBeInstanceOf(UnknownUser);
    expect(await env().loginKeys(account)).toEqual([]);
  });
});

describe('SAML sign-in', () => {
  it.each([
    {
      name: 'by default: Issuer and audience redirectURI, persistent NameIDs',
      fields: '',
      issuer: () => env().samlCallback,
      format: 'urn:oasis:names:tc:SAML:2.0:nameid-format:persistent',
      nameID: (account: string) => `${account}-id`,
    },
    {
      name: 'with entityIssuer, and nameIDPolicyFormat in its short form',
      fields: `    entityIssuer: https://platform.example/saml
    nameIDPolicyFormat: emailAddress`,
      issuer: () => 'https://platform.example/saml',
      format: 'urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress',
      nameID: (account: string) => `${account}@example.com`,
    },
  ])('signs a user in through the gateway, $name', async ({ fields, issuer, format, nameID }) => {
    const { saml } = env();
    await env().configure(`
auth:
${samlSection(env())}
    ssoIssuer: ${saml.entityId}
    usernameAttr: uid
    emailAttr: mail
    groupsAttr: memberOf
    groupsDelim: ','
${fields}
`);
    registerSamlServiceProvider(env(), 'saml');
    const account = uniqueName('carol');
    saml.accounts.set(account, {
      nameID: nameID(account),
      attributes: { uid: account, mail: `${account}@example.com`, memberOf: 'team-a,team-b' },
    });
    const page = await samlSignIn(env(), 'saml', account);
    expect(page.status, page.text).toBe(200);
    // The AuthnRequest as the identity provider read it.
    expect(saml.requests.at(-1)).toEqual({
      id: expect.stringMatching(/^_/),
      issuer: issuer(),
      nameIDFormat: format,
    });
    // The sign-in's sealed state reaches the ACS with the provider's cross-site POST only as
    // SameSite=None, which browsers take only with Secure.
    const cookie = page.start.setCookies.find((header) => header.startsWith('platform_login_saml='));
    expect(cookie).toMatch(/; SameSite=None/);
    expect(cookie).toMatch(/; Secure/);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; Path=\/auth\/saml\//);
    const [key] = await env().loginKeys(account);
    expect(key?.spec.identity).toMatchObject({
      connector: 'saml',
      userId: nameID(account),
      username: account,
      email: `${account}@example.com`,
      groups: ['team-a', 'team-b'],
    });
    expect((await env().use(page.key as string, '/ownedaccesskeys')).status).toBe(200);
  });
});

describe('Login key lifetime', () => {
  it('lives loginAccessKeyTTLSeconds (read from the configuration), then the access-key controller deletes it', async () => {
    const { gateway, service } = env();
    await env().configure('auth: { loginAccessKeyTTLSeconds: 4 }');
    const name = await env().userWithPassword('shortlived', 'short lived password');
    const minted = await service.passwordLogin({
      username: name,
      password: 'short lived password',
      source: '10.0.0.9',
    });
    // A key of the same user that is not a Login key: the login ttl is not its.
    const automation = await gateway.key({ user: name, type: 'User' });
    const stored = await env().storedKey(minted.keyName);
    expect(stored?.spec.ttl).toBeUndefined();
    expect((await env().use(minted.key, '/ownedaccesskeys')).status).toBe(200);
    await eventually(
      async () => (await env().storedKey(minted.keyName))?.status?.expirationTimestamp !== undefined,
      30_000,
      'the expiry recorded',
    );
    const expiration = Date.parse((await env().storedKey(minted.keyName))?.status?.expirationTimestamp);
    expect(expiration - Date.parse(stored?.metadata.creationTimestamp ?? '')).toBe(4000);
    await eventually(
      async () => (await env().storedKey(minted.keyName)) === undefined,
      60_000,
      'the key deleted',
    );
    const answer = await call(`${gateway.api}/ownedaccesskeys`, {
      token: minted.key,
      dispatcher: gateway.dispatcher,
    });
    expect(answer.status).toBe(401);
    expect((await env().use(automation, '/ownedaccesskeys')).status).toBe(200);
    const events = await new KubeClient(gateway.kc).request<{
      items: { reason?: string; regarding?: { name?: string } }[];
    }>({ method: 'GET', path: '/apis/events.k8s.io/v1/events' });
    expect(events.items.some((e) => e.reason === 'AccessKeyExpired' && e.regarding?.name === name)).toBe(
      true,
    );
  });

  it('does not expire with loginAccessKeyTTLSeconds 0', async () => {
    const { service } = env();
    await env().configure('auth: { loginAccessKeyTTLSeconds: 0 }');
    const name = await env().userWithPassword('forever', 'forever password 1');
    const minted = await service.passwordLogin({
      username: name,
      password: 'forever password 1',
      source: '10.0.0.9',
    });
    await eventually(
      async () => (await env().storedKey(minted.keyName))?.status?.conditions?.length > 0,
      30_000,
      'the key reconciled',
    );
    const stored = await env().storedKey(minted.keyName);
    expect(stored?.status?.expirationTimestamp).toBeUndefined();
    expect(stored?.status?.conditions?.[0]?.message).toContain('does not expire');
  });
});

describe('platform configuration admission', () => {
  it('warns about each field that has no effect, naming it, and not about the OIDC section', async () => {
    const g = env().gateway;
    const config = `
secretStore: { enabled: true, address: https://vault.example }
costControl: { enabled: true }
auth:
  oidc:
    issuerUrl: https://idp.example
    clientId: platform
    redirectURI: https://platform.example/auth/oidc/callback
    postLogoutRedirectURI: https://platform.example/auth/login
`;
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: PLATFORM_CONFIG_SECRET, namespace: g.platformNamespace },
      stringData: { [PLATFORM_CONFIG_KEY]: config },
    };
    // The real apiserver calls the platform's admission webhook; kubectl prints its warnings.
    const run = await kubectl(['apply', '--dry-run=server', '-f', '-'], {
      kubeconfig: g.cluster?.kubeconfigPath as string,
      stdin: JSON.stringify(secret),
    });
    expect(run.code, run.stderr).toBe(0);
    const warnings = run.stderr.split('\n').filter((line) => line.includes('has no effect'));
    expect(warnings).toEqual([
      expect.stringMatching(/^Warning: secretStore: accepted; has no effect in this platform \(.+\)$/),
      expect.stringMatching(/^Warning: costControl: accepted; has no effect in this platform \(.+\)$/),
    ]);
    // postLogoutRedirectURI works (RP-initiated logout): no warning names it.
    expect(run.stderr).not.toContain('postLogoutRedirectURI');
  });
});
