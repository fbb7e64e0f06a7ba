import { describe, expect, it } from 'vitest';
import { ProviderLoginFailed } from '../../src/login/code-flow.ts';
import { userNameFor } from '../../src/login/outcome.ts';
import type { ScriptedAgent } from '../login/support/browse.ts';
import { useLoginEnv } from '../login/support/login-env.ts';
import {
  browserFor,
  callbackFor,
  configureClusterManager,
  configureHostedGit,
  keyOn,
  postClusterManagerKey,
  standIns,
  storedUser,
} from '../login/support/sign-in.ts';
import { startRedirect, viaUrl } from '../login/support/sso.ts';
import { uniqueName } from '../support/cluster.ts';

/**
 * Attacks on the sign-in through the hosted providers (stood in for by local servers that answer
 * as the providers document, `e2e/login/support/provider-stand-ins.ts`), through the platform's
 * login endpoints: each must be refused with nothing minted, nothing taken over, nothing leaked.
 */

const env = useLoginEnv({
  providers: true,
  throttle: {
    perSource: { failures: 3, windowSeconds: 300, blockSeconds: 300 },
    perUser: { failures: 3, windowSeconds: 300, blockSeconds: 300 },
    perDevice: { failures: 3, windowSeconds: 300, blockSeconds: 300 },
  },
});

const providers = () => standIns(env());

const callbackIn = async (agent: ScriptedAgent, id: string, username: string) =>
  (await callbackFor(env(), agent, id, username)).callback;

describe('OAuth callbacks of a provider without ID tokens', () => {
  it('refuses a forged state before redeeming anything, and a replayed code at the provider', async () => {
    const { hostedGit } = providers();
    await configureHostedGit(env());
    const victim = uniqueName('victim');
    hostedGit.accounts.set(victim, { id: 201, email: `${victim}@example.com` });

    // The attacker's own callback (its code, its state) replayed into the victim's browser, which
    // started a sign-in of its own: the state does not match, nothing is redeemed.
    const attacker = browserFor(env());
    const attackerCallback = await callbackIn(attacker, 'hostedGit', victim);
    const victimBrowser = browserFor(env());
    await victimBrowser.request(`${env().platformUrl}/auth/hostedGit/login`);
    const before = hostedGit.oauth.tokenRequests.length;
    const csrf = await victimBrowser.request(attackerCallback);
    expect(csrf.status).toBe(401);
    expect(csrf.text).toContain('state');
    expect(hostedGit.oauth.tokenRequests.length).toBe(before);

    // The attacker's own callback works once; replayed, its state is spent (the sealed cookie is
    // cleared by the first use), so nothing reaches the provider again.
    const first = await attacker.request(attackerCallback);
    expect(keyOn(first.text)).toBeDefined();
    const replay = await attacker.request(attackerCallback);
    expect(replay.status).toBe(400);
    expect(keyOn(replay.text)).toBeUndefined();
    expect(hostedGit.oauth.tokenRequests.slice(before)).toEqual(['issued']);

    // A replay that keeps the transaction (a copied cookie) reaches the provider, which refuses
    // the spent code.
    const connector = env().connectors.connectorFor(
      env().connectors.method(env().config().auth, 'hostedGit') as never,
    );
    const { url, transaction } = await startRedirect(connector);
    const callback = await attacker.followUntil(
      url.toString(),
      `${env().platformUrl}/auth/hostedGit/callback`,
      {
        path: /authorize$/,
        fields: { username: victim },
      },
    );
    await env().service.ssoLogin(await connector.finish(viaUrl(callback), transaction));
    await expect(connector.finish(viaUrl(callback), transaction)).rejects.toBeInstanceOf(ProviderLoginFailed);
    expect(hostedGit.oauth.tokenRequests.slice(before)).toEqual([
      'issued',
      'issued',
      'bad_verification_code',
    ]);
    expect(await env().loginKeys(userNameFor(victim))).toHaveLength(2);
  });

  it("keeps the provider's token on the server: not on the page, not through the API", async () => {
    const { hostedGit } = providers();
    await configureHostedGit(env());
    const name = uniqueName('tokenholder');
    hostedGit.accounts.set(name, { id: 202, email: `${name}@example.com` });
    const agent = browserFor(env());
    const page = await agent.request(await callbackIn(agent, 'hostedGit', name));
    const key = keyOn(page.text) as string;
    const [stored] = await env().loginKeys(userNameFor(name));
    const providerToken = JSON.parse(stored?.spec.identity.connectorData).accessToken as string;
    expect(providerToken).toMatch(/^at_/);
    expect(page.text).not.toContain(providerToken);
    const listed = await env().use(key, '/ownedaccesskeys');
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.json)).not.toContain(providerToken);
    const mine = listed.json.items.find((item: { spec: { identity?: object } }) => item.spec.identity);
    expect(mine.spec.identity).toMatchObject({ connector: 'hostedGit' });
    expect(mine.spec.identity.connectorData).toBeUndefined();
  });
});

describe('usernames a provider hands out', () => {
  it('never take over a User an admin made, even with its exact name', async () => {
    const { hostedGit } = providers();
    await configureHostedGit(env());
    // A local account with a password; someone registers the same login at the provider.
    const local = await env().userWithPassword('localadmin', 'correct horse battery');
    hostedGit.accounts.set(local, { id: 203, email: 'attacker@example.net' });
    const agent = browserFor(env());
    const page = await agent.request(await callbackIn(agent, 'hostedGit', local));
    expect(page.status).toBe(403);
    expect(page.text).toContain('not bound to this sign-in method');
    expect(keyOn(page.text)).toBeUndefined();
    expect(await env().loginKeys(local)).toEqual([]);
    expect(
      (await storedUser(env(), local))?.metadata.annotations?.['login.management.platform/connector'],
    ).toBeUndefined();
    // The password still belongs to its owner.
    await env().service.passwordLogin({
      username: local,
      password: 'correct horse battery',
      source: '10.9.9.9',
    });
  });

  it('refuse reserved names and accounts outside the hosted domain', async () => {
    const { clusterManager, idpA } = providers();
    clusterManager.users.set('u-sys', { id: 'u-sys', username: 'system:masters', enabled: true, groups: [] });
    await configureClusterManager(env(), {
      extra: `  idpA:
    clientId: ${idpA.clientId}
    clientSecret: ${idpA.clientSecret}
    redirectURI: ${env().platformUrl}/auth/idpA/callback
    hostedDomains: [example.com]
`,
    });
    const agent = browserFor(env());
    const reserved = await postClusterManagerKey(env(), agent, clusterManager.apiKey('u-sys'));
    expect(reserved.status).toBe(403);
    expect(reserved.text).toContain('reserved prefix');
    // A personal account whose address is at the domain, without the domain's hd claim.
    const personal = uniqueName('personal');
    idpA.accounts.set(personal, { claims: { email: `${personal}@example.com`, email_verified: true } });
    const page = await agent.request(await callbackIn(agent, 'idpA', personal));
    expect(page.status).toBe(403);
    expect(keyOn(page.text)).toBeUndefined();
    expect(await env().loginKeys(userNameFor(`${personal}@example.com`))).toEqual([]);
  });
});

describe('guessing cluster-manager keys', () => {
  it('is throttled per source, and no submitted key is echoed', async () => {
    const { clusterManager } = providers();
    const owner = uniqueName('owner');
    clusterManager.users.set('u-owner', { id: 'u-owner', username: owner, enabled: true, groups: [] });
    await configureClusterManager(env());
    const agent = browserFor(env());
    const post = (key: string) => postClusterManagerKey(env(), agent, key);
    const guesses = ['token-aaaa:guessone', 'token-bbbb:guesstwo', 'token-cccc:guessthree'];
    for (const guess of guesses) {
      const refused = await post(guess);
      expect(refused.status).toBe(401);
      expect(refused.text).not.toContain(guess.split(':')[1]);
    }
    const calls = clusterManager.calls.length;
    const blocked = await post(clusterManager.apiKey('u-owner'));
    expect(blocked.status).toBe(429);
    // Blocked before the cluster manager is asked.
    expect(clusterManager.calls.length).toBe(calls);
    expect(await env().loginKeys(userNameFor(owner))).toEqual([]);
  });
});
