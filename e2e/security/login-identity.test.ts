import { describe, expect, it } from 'vitest';
import { userNameFor } from '../../src/login/outcome.ts';
import { call } from '../gateway/support.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import { expectRefusedSignIn, keyOn, oidcSection, signIn, storedUser } from '../login/support/sign-in.ts';
import { uniqueName } from '../support/cluster.ts';
import { eventually } from '../support/wait.ts';

/**
 * Attacks on who a single sign-on is (issue 32), made against a real OpenID provider
 * (oidc-provider) whose accounts the test defines, claims included (`sub`: the account's login there;
 * `preferred_username`, `email`, `email_verified`, `groups`), through the gateway's login endpoints and the platform's
 * apiserver. A person is their account at the provider (connector, subject): no username, however
 * chosen, lands on someone else's User. Single sign-ons are not throttled by client address (only
 * passwords and cluster-manager keys are), so these tests share none.
 */

// Garbage collection removes the Login keys of a deleted User (they record it as their owner).
const env = useLoginEnv({ controllerManager: true });

async function configureOidc(authExtra = '') {
  await env().configure(`
auth:
${authExtra}
${oidcSection(env())}
    scopes: [profile, email, groups]
`);
}

/**
 * An account at the provider, with the claims it vouches for; returns its login (what is typed at
 * the provider's sign-in page), which the provider also gives as its subject (`sub`).
 */
function account(claims: Record<string, unknown>, login = uniqueName('sub')): string {
  env().oidc.accounts.set(login, { claims });
  return login;
}

/** The names of the keys a key may list (non-admins see their own only). */
async function keysListedBy(key: string): Promise<string[]> {
  const listed = await env().use(key, '/ownedaccesskeys');
  expect(listed.status).toBe(200);
  return listed.json.items.map((item: { metadata: { name: string } }) => item.metadata.name);
}

describe('account takeover by username', () => {
  it('a provider username equal to the object name of another person’s User lands on a User of its own', async () => {
    await configureOidc();
    const victimName = `Alice-Smith-${uniqueName('x')}`;
    const victim = account({ preferred_username: victimName });
    const victimPage = await signIn(env(), 'oidc', victim);
    expect(victimPage.status, victimPage.text).toBe(200);
    const victimUser = userNameFor(victimName);
    const [victimKey] = await env().loginKeys(victimUser);
    expect(victimKey).toBeDefined();

    // Anyone can register a login spelled like the victim's User at a public provider.
    const attacker = account({ preferred_username: victimUser });
    const attackerPage = await signIn(env(), 'oidc', attacker);
    expect(attackerPage.status, attackerPage.text).toBe(200);
    const attackerUser = userNameFor(victimUser);
    expect(attackerUser).not.toBe(victimUser);
    const [attackerKey] = await env().loginKeys(attackerUser);
    expect(attackerKey?.spec.user).toBe(attackerUser);
    // The attacker's key sees its own key only; the victim keeps exactly theirs.
    const listed = await keysListedBy(attackerPage.key as string);
    expect(listed).toContain(attackerKey?.metadata.name);
    expect(listed).not.toContain(victimKey?.metadata.name);
    expect((await env().loginKeys(victimUser)).map((key) => key.metadata.name)).toEqual([
      victimKey?.metadata.name,
    ]);
  });

  it('another subject with the very same username is refused, and the User keeps its owner and groups', async () => {
    await configureOidc();
    const username = uniqueName('bob');
    const victim = account({ preferred_username: username, groups: ['payroll'] });
    expect((await signIn(env(), 'oidc', victim)).status).toBe(200);
    const before = await storedUser(env(), username);
    expect(before?.spec.ssoIdentity).toEqual({ connector: 'oidc', userId: victim });

    // A recycled or renamed login, or one whose owner set preferred_username themselves.
    const impostor = account({ preferred_username: username, groups: ['everyone'] });
    expectRefusedSignIn(await signIn(env(), 'oidc', impostor), /belongs to another account/, 403);
    expect(await env().loginKeys(userNameFor(username))).toHaveLength(1);
    const after = await storedUser(env(), username);
    expect(after?.spec).toEqual(before?.spec);

    // The owner still signs in.
    expect(keyOn((await signIn(env(), 'oidc', victim)).text)).toMatch(/^pak_/);
  });

  it('a User bound by the old name-only annotation is refused at sign-in until an admin records its account', async () => {
    await configureOidc();
    const username = uniqueName('legacy');
    await env().create(
      'User',
      { name: username, annotations: { 'login.management.platform/connector': 'oidc' } },
      { username, subject: username },
    );
    const owner = account({ preferred_username: username });
    const attacker = account({ preferred_username: username });
    expectRefusedSignIn(await signIn(env(), 'oidc', attacker), /before accounts were recorded/, 403);
    expectRefusedSignIn(await signIn(env(), 'oidc', owner), /before accounts were recorded/, 403);
    expect(await env().loginKeys(username)).toEqual([]);

    // The admin records the owner's account (docs/login.md): the owner signs in, nobody else.
    await env().gateway.custom.patchClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'users',
      name: username,
      body: [{ op: 'add', path: '/spec/ssoIdentity', value: { connector: 'oidc', userId: owner } }],
    });
    expect(keyOn((await signIn(env(), 'oidc', owner)).text)).toMatch(/^pak_/);
    expectRefusedSignIn(await signIn(env(), 'oidc', attacker), /belongs to another account/, 403);
    expect(await env().loginKeys(username)).toHaveLength(1);
  });
});

describe('a User deleted and made again', () => {
  it('does not inherit the Login keys of the earlier User of its name', async () => {
    await configureOidc();
    const username = uniqueName('dana');
    const first = account({ preferred_username: username });
    const earlier = await signIn(env(), 'oidc', first);
    expect((await env().use(earlier.key as string, '/ownedaccesskeys')).status).toBe(200);
    const [earlierKey] = await env().loginKeys(userNameFor(username));
    await env().gateway.custom.deleteClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'users',
      name: userNameFor(username),
    });
    // Creation timestamps have whole seconds: the next User must be made in a later one.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    // Someone else gets the username now (a new hire, a recycled login) and signs in.
    const next = account({ preferred_username: username });
    const later = await signIn(env(), 'oidc', next);
    expect(later.status, later.text).toBe(200);
    // The gateway's caches hold the new User once its key is accepted.
    expect((await env().use(later.key as string, '/ownedaccesskeys')).status).toBe(200);
    const g = env().gateway;
    const stale = await call(`${g.api}/ownedaccesskeys`, {
      token: earlier.key as string,
      dispatcher: g.dispatcher,
    });
    expect(stale.status).toBe(401);
    // The earlier key recorded its User: the garbage collector removes it with that User, so the
    // new User does not even list it.
    await eventually(
      async () => (await env().storedKey(earlierKey?.metadata.name ?? '')) === undefined,
      30_000,
      'the earlier Login key to go with its User',
    );
    expect(await keysListedBy(later.key as string)).toHaveLength(1);
  });
});

describe('username from an unverified email', () => {
  it('an email the provider did not verify is never the username: the subject is', async () => {
    await configureOidc();
    const victimEmail = `${uniqueName('carol')}@example.com`;
    const victim = account({ email: victimEmail, email_verified: true });
    expect((await signIn(env(), 'oidc', victim)).status).toBe(200);
    const [victimKey] = await env().loginKeys(userNameFor(victimEmail));
    expect(victimKey?.spec.identity.username).toBe(victimEmail);

    // The attacker types the victim's address into their own account, unverified.
    const attacker = account({ email: victimEmail, email_verified: false });
    const page = await signIn(env(), 'oidc', attacker);
    expect(page.status, page.text).toBe(200);
    const [attackerKey] = await env().loginKeys(userNameFor(attacker));
    expect(attackerKey?.spec.identity).toMatchObject({ userId: attacker, username: attacker });
    expect(await keysListedBy(page.key as string)).not.toContain(victimKey?.metadata.name);
    expect(await env().loginKeys(userNameFor(victimEmail))).toHaveLength(1);

    // No User is named after an unverified address that nobody claimed before.
    const unclaimed = `${uniqueName('ceo')}@example.com`;
    const squatter = account({ email: unclaimed, email_verified: false });
    expect((await signIn(env(), 'oidc', squatter)).status).toBe(200);
    expect(await storedUser(env(), unclaimed)).toBeUndefined();
  });
});

describe('teams made at sign-in', () => {
  it('never makes a Team a Project names, so a group named like it gains nothing', async () => {
    await configureOidc();
    const team = uniqueName('release-managers');
    const project = uniqueName('p');
    await env().create(
      'Project',
      { name: project },
      { members: [{ kind: 'Team', name: team, clusterRole: 'admin' }] },
    );
    const other = uniqueName('group');
    const attacker = account({ preferred_username: uniqueName('mallory'), groups: [team, other] });
    const page = await signIn(env(), 'oidc', attacker);
    expect(page.status, page.text).toBe(200);
    const teams = (await env().gateway.custom.listClusterCustomObject({
      group: 'management.platform',
      version: 'v1',
      plural: 'teams',
    })) as { items: Array<{ metadata: { name: string } }> };
    const names = teams.items.map((item) => item.metadata.name);
    expect(names).not.toContain(team);
    // Groups no Project names still get their Team: the refusal is for the reserved name alone.
    expect(names).toContain(other);
  });
});
