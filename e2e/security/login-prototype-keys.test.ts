import { afterEach, describe, expect, it } from 'vitest';
import { teamNameFor, userNameFor } from '../../src/login/outcome.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import {
  oidcSection,
  registerSamlServiceProvider,
  samlSection,
  samlSignIn,
  signIn,
  storedUser,
} from '../login/support/sign-in.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * A provider's claims and groups named like Object.prototype members (`__proto__`, `constructor`,
 * `toString`, ...) are data (issue 29): signed by a real OpenID provider (oidc-provider, its ID
 * token rewritten and signed again with its own key where it must carry such a claim), taken
 * through the gateway's login endpoints into the platform's apiserver. The sign-in works with them
 * as data: no crash, no 500, nothing smuggled through a claim named `__proto__`, and the User,
 * Teams and Login key have exactly the expected shape.
 */

const env = useLoginEnv();

afterEach(() => {
  env().oidc.tamper = undefined;
});

async function configureOidc(extra = '') {
  await env().configure(`
auth:
${oidcSection(env())}
    scopes: [profile, email, groups]
${extra}`);
}

type Team = {
  metadata: { name: string };
  spec: { displayName?: string; groups?: string[]; users?: string[] };
};

const team = async (name: string) =>
  (await env().gateway.custom.getClusterCustomObject({
    group: 'management.platform',
    version: 'v1',
    plural: 'teams',
    name,
  })) as Team;

/** A Login key's identity without its connectorData (the provider's refresh token, checked to be there). */
function withoutConnectorData(identity: Record<string, unknown> | undefined): Record<string, unknown> {
  const { connectorData, ...rest } = identity ?? {};
  expect(typeof connectorData).toBe('string');
  return rest;
}

describe("a provider's names for groups and claims are data", () => {
  it('groups named __proto__, constructor, toString and hasOwnProperty are groups: the User has them, each has its Team', async () => {
    await configureOidc();
    const groups = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];
    const login = uniqueName('sub');
    const username = uniqueName('groups');
    env().oidc.accounts.set(login, { claims: { preferred_username: username, groups } });
    const page = await signIn(env(), 'oidc', login);
    expect(page.status, page.text).toBe(200);
    expect(page.key).toMatch(/^pak_/);

    const user = await storedUser(env(), username);
    // The User keeps them sorted, the key as the provider sent them.
    expect(user?.spec.groups).toEqual([...groups].sort());
    const [key] = await env().loginKeys(userNameFor(username));
    expect(withoutConnectorData(key?.spec.identity)).toEqual({
      connector: 'oidc',
      userId: login,
      username,
      preferredUsername: username,
      groups,
    });
    for (const group of groups) {
      const made = await team(teamNameFor(group));
      expect(made.spec).toMatchObject({ displayName: group, groups: [group] });
      await eventually(
        async () => (await team(teamNameFor(group))).spec.users?.includes(username) === true,
        30_000,
        `the Team of group ${group} listing the user`,
      );
      expect((await team(teamNameFor(group))).spec.users).toEqual([username]);
    }
  });

  it('claims named __proto__, constructor and toString in the ID token: allowed ones are extra claims, __proto__ smuggles nothing', async () => {
    await configureOidc('    allowedExtraClaims: [__proto__, constructor, toString, valueOf]');
    const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const login = uniqueName('sub');
    // No username or groups of its own: a claim __proto__ taken as the claims' prototype would
    // give it this one's.
    env().oidc.accounts.set(login, { claims: {} });
    env().oidc.tamper = {
      claims: JSON.parse(
        '{"__proto__":{"preferred_username":"admin","email":"boss@example.com","email_verified":true,"groups":["system:masters"]},"constructor":"c","toString":["t1","t2"]}',
      ),
    };
    expect(Object.hasOwn(env().oidc.tamper?.claims ?? {}, '__proto__')).toBe(true);
    const page = await signIn(env(), 'oidc', login);
    expect(page.status, page.text).toBe(200);
    expect(page.key).toMatch(/^pak_/);

    // The username is the subject (no preferred_username, no verified email of its own).
    const user = await storedUser(env(), login);
    expect(user?.spec.username).toBe(login);
    expect(user?.spec.groups ?? []).toEqual([]);
    expect(user?.spec.email).toBeUndefined();
    expect(await storedUser(env(), 'admin')).toBeUndefined();
    const [key] = await env().loginKeys(userNameFor(login));
    const identity = withoutConnectorData(key?.spec.identity);
    expect(identity).toEqual({
      connector: 'oidc',
      userId: login,
      username: login,
      groups: [],
      extraClaims: { constructor: ['c'], toString: ['t1', 't2'] },
    });
    expect(Object.keys(identity.extraClaims as object).sort()).toEqual(['constructor', 'toString']);
    // Nothing reached Object.prototype of the process serving the login.
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
  });

  it('a claim named like an Object.prototype member that the token lacks is absent: the configured claim names find nothing', async () => {
    await configureOidc('    groupsClaim: toString\n    preferredUsername: constructor');
    const login = uniqueName('sub');
    const username = uniqueName('absent');
    env().oidc.accounts.set(login, { claims: { preferred_username: username, groups: ['dev'] } });
    const page = await signIn(env(), 'oidc', login);
    expect(page.status, page.text).toBe(200);
    const [key] = await env().loginKeys(userNameFor(username));
    expect(withoutConnectorData(key?.spec.identity)).toEqual({
      connector: 'oidc',
      userId: login,
      username,
      groups: [],
    });
  });

  it('a SAML attribute named __proto__ with child elements smuggles no groups or email; attributes named constructor and toString are attributes', async () => {
    const { saml } = env();
    await env().configure(`
auth:
${samlSection(env())}
    ssoIssuer: ${saml.entityId}
    usernameAttr: constructor
    emailAttr: mail
    groupsAttr: roles
`);
    registerSamlServiceProvider(env(), 'saml');
    const prototypeBefore = Object.getOwnPropertyNames(Object.prototype).sort();
    const account = uniqueName('mallory');
    // node-saml assigns each attribute into an object: a structured value named __proto__ becomes
    // the prototype of the attributes (its children roles and mail as values of the form
    // [{_: text}]). The platform reads own attributes only, so they are not the person's.
    saml.accounts.set(account, {
      nameID: `${account}@example.com`,
      attributes: Object.fromEntries([
        ['constructor', account],
        ['toString', 'not a function'],
        ['__proto__', { elements: '<roles>platform-admins</roles><mail>boss@example.com</mail>' }],
      ]),
    });
    const page = await samlSignIn(env(), 'saml', account);
    expect(page.status, page.text).toBe(200);
    expect(page.key).toMatch(/^pak_/);
    const user = await storedUser(env(), account);
    expect(user?.spec.username).toBe(account);
    expect(user?.spec.groups ?? []).toEqual([]);
    expect(user?.spec.email).toBeUndefined();
    const [key] = await env().loginKeys(userNameFor(account));
    expect(key?.spec.identity).toEqual({
      connector: 'saml',
      userId: `${account}@example.com`,
      username: account,
      groups: [],
    });
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeBefore);
  });
});
