import type { ConfigStatus } from '../api/config.ts';
import type { User } from '../api/identity.ts';
import { GROUP_VERSION } from '../api/meta.ts';
import { isObjectName } from '../api/names.ts';
import { type OwnedAccessKey, PASSWORD_CONNECTOR, type SsoIdentity } from '../api/ownedaccesskey.ts';
import { resources } from '../api/resources.ts';
import { generateAccessKey, type RandomBytes } from '../identity/keys.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, objectPath } from '../runtime/kube-client.ts';
import { LoginAccounts } from './accounts.ts';
import { passwordLoginEnabled } from './connectors.ts';
import { type ExternalIdentity, LoginRefused } from './identity.ts';
import { keyIdentity } from './outcome.ts';
import { hashPassword, passwordProblem, verifyPassword } from './password.ts';
import { PasswordStore } from './password-store.ts';
import { type LoginThrottle, LoginThrottled } from './throttle.ts';

export { LoginThrottled };

/**
 * Sign-ins against the apiserver: checks a password or takes an identity a connector verified,
 * carries out what a login does (`outcome.ts`), and mints the `type: Login` OwnedAccessKey whose
 * plaintext is returned once. Writes are made with the gateway's own identity; the key's
 * plaintext passes only through admission, which stores its keyed hash.
 */

export class PasswordLoginDisabled extends LoginRefused {
  override readonly name = 'PasswordLoginDisabled';
  constructor() {
    super('signing in with a password is disabled on this platform');
  }
}

/** Unknown user or wrong password: one class, one message, for both. */
export class InvalidCredentials extends LoginRefused {
  override readonly name = 'InvalidCredentials';
  override readonly code = 401;
  constructor() {
    super('wrong username or password');
  }
}

export class UserNotFound extends LoginRefused {
  override readonly name = 'UserNotFound';
  override readonly code = 404;
  constructor(user: string) {
    super(`user "${user}" not found`);
  }
}

export class NewPasswordRejected extends LoginRefused {
  override readonly name = 'NewPasswordRejected';
  override readonly code = 422;
}

export interface MintedLogin {
  /** The plaintext key, for the person signing in only. */
  readonly key: string;
  /** The OwnedAccessKey's name. */
  readonly keyName: string;
  /** The User object name. */
  readonly user: string;
  /** A device token after a password sign-in (see `throttle.ts`). */
  readonly deviceToken?: string | undefined;
}

export interface LoginServiceDeps {
  readonly api: KubeApi;
  readonly platformNamespace: string;
  readonly random: RandomBytes;
  readonly config: () => ConfigStatus;
  readonly throttle: LoginThrottle;
  readonly now?: () => number;
}

export class LoginService {
  private readonly passwords: PasswordStore;
  private readonly accounts: LoginAccounts;
  private readonly now: () => number;

  constructor(private readonly deps: LoginServiceDeps) {
    this.passwords = new PasswordStore(deps.api, deps.platformNamespace);
    this.accounts = new LoginAccounts(deps.api, deps.config);
    this.now = deps.now ?? Date.now;
  }

  private getUser(name: string): Promise<User | undefined> {
    return this.accounts.getUser(name);
  }

  /**
   * Checks a password under the throttle: the attempt is counted before anything is read (and
   * given back when the password is right), so attempts sent at once are never all checked.
   * A username that is no User object name (`alice/`, `Alice`: the apiserver would find `alice`
   * by some of them) names no one: it is counted against its source and refused without a
   * check. Unknown users, users without a password and wrong passwords all cost the same reads
   * (the User, then a password Secret) and one scrypt, and give {@link InvalidCredentials}.
   */
  private async checkPassword(
    input: { source: string; username: string; deviceToken?: string | undefined },
    password: string,
  ): Promise<User> {
    if (!isObjectName(input.username)) {
      const admitted = await this.deps.throttle.admit({ source: input.source });
      admitted.done();
      throw new InvalidCredentials();
    }
    // The per-user counter is keyed on the User object's name, which a valid name read by GET is.
    const admitted = await this.deps.throttle.admit({
      source: input.source,
      user: input.username,
      deviceToken: input.deviceToken,
    });
    try {
      const found = await this.getUser(input.username);
      const user = found?.metadata.name === input.username ? found : undefined;
      // An unknown user reads a password Secret too (one that cannot match), so both take as long.
      const stored = await this.passwords.hashOf(user ?? { metadata: { name: input.username } });
      const check = await verifyPassword(password, user ? stored : undefined);
      if (!user || !check.ok) throw new InvalidCredentials();
      await admitted.succeeded();
      if (check.rehash) await this.passwords.store(user, await hashPassword(password, this.deps.random));
      return user;
    } finally {
      admitted.done();
    }
  }

  /** A password sign-in; `username` is the User's name. */
  async passwordLogin(input: {
    username: string;
    password: string;
    source: string;
    deviceToken?: string | undefined;
  }): Promise<MintedLogin> {
    const user = await this.passwordUser(input);
    const name = user.metadata.name ?? input.username;
    const minted = await this.mintKey(
      { name, uid: user.metadata.uid },
      {
        connector: PASSWORD_CONNECTOR,
        userId: user.metadata.uid ?? name,
        username: user.spec.username ?? name,
        ...(user.spec.email ? { email: user.spec.email } : {}),
        groups: user.spec.groups ?? [],
      },
    );
    return { ...minted, deviceToken: await this.deps.throttle.issueDeviceToken(name, this.deps.random) };
  }

  /** The User a password sign-in proves, not disabled (no key is minted). */
  private async passwordUser(input: {
    username: string;
    password: string;
    source: string;
    deviceToken?: string | undefined;
  }): Promise<User> {
    if (!passwordLoginEnabled(this.deps.config().auth)) throw new PasswordLoginDisabled();
    const user = await this.checkPassword(input, input.password);
    if (user.spec.disabled === true) throw new LoginRefused('this user is disabled');
    return user;
  }

  /**
   * A password sign-in for another application (the platform as an OpenID provider): the same
   * checks and device token as {@link passwordLogin}, but no key: the person is only named.
   */
  async passwordSignIn(input: {
    username: string;
    password: string;
    source: string;
    deviceToken?: string | undefined;
  }): Promise<{ user: string; deviceToken: string | undefined }> {
    const user = await this.passwordUser(input);
    const name = user.metadata.name ?? input.username;
    return { user: name, deviceToken: await this.deps.throttle.issueDeviceToken(name, this.deps.random) };
  }

  /**
   * A person changes their own password: the old one is checked exactly as a sign-in is
   * (throttled, counted), then the new one is stored and the user's Login keys are deleted (other
   * sessions end; keys for automation stay).
   */
  async changePassword(input: {
    username: string;
    oldPassword: string;
    newPassword: string;
    source: string;
    deviceToken?: string | undefined;
  }): Promise<void> {
    if (!passwordLoginEnabled(this.deps.config().auth)) throw new PasswordLoginDisabled();
    const user = await this.checkPassword(input, input.oldPassword);
    await this.setPassword(user, input.newPassword);
  }

  /** Sets a user's password (an admin's action, authorized by the caller) and ends its Login sessions. */
  async setPassword(user: User | string, newPassword: string): Promise<void> {
    const problem = passwordProblem(newPassword);
    if (problem) throw new NewPasswordRejected(problem.message);
    const object = typeof user === 'string' ? await this.getUser(user) : user;
    if (!object) throw new UserNotFound(String(user));
    await this.passwords.store(object, await hashPassword(newPassword, this.deps.random));
    await this.deleteLoginKeys(object.metadata.name ?? '');
  }

  private async deleteLoginKeys(user: string): Promise<void> {
    const list = await this.deps.api.request<{ items: OwnedAccessKey[] }>({
      method: 'GET',
      path: collectionPath(resources.ownedAccessKeys),
      query: { fieldSelector: `spec.user=${user}` },
    });
    for (const key of list.items) {
      if (key.spec.type !== 'Login' || key.spec.user !== user) continue;
      await this.deleteKey(key.metadata.name ?? '');
    }
  }

  private async deleteKey(name: string): Promise<void> {
    try {
      await this.deps.api.request({
        method: 'DELETE',
        path: objectPath(resources.ownedAccessKeys, undefined, name),
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /**
   * Signs out: deletes the Login key `keyName` of `user` (only a Login key, only the user's own),
   * and returns the identity it held (its connector decides where the person goes next), or
   * undefined when there was no such key.
   */
  async logout(user: string, keyName: string): Promise<SsoIdentity | undefined> {
    let key: OwnedAccessKey;
    try {
      key = await this.deps.api.request<OwnedAccessKey>({
        method: 'GET',
        path: objectPath(resources.ownedAccessKeys, undefined, keyName),
      });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
    if (key.spec.type !== 'Login' || key.spec.user !== user) return undefined;
    await this.deleteKey(keyName);
    return key.spec.identity ?? {};
  }

  /** A single-sign-on login: the User, its teams and memberships (`accounts.ts`), then the key. */
  async ssoLogin(identity: ExternalIdentity): Promise<MintedLogin> {
    return this.mintKey(await this.accounts.applyIdentity(identity, { createUser: true }), identity);
  }

  /** A single-sign-on for another application (the OpenID provider): the User as a login makes it, no key. */
  async ssoSignIn(identity: ExternalIdentity): Promise<string> {
    return (await this.accounts.applyIdentity(identity, { createUser: true })).name;
  }

  /**
   * Creates the Login key (admission stores only its hash) and returns its plaintext. The key
   * records its User's uid as an owner reference: it works for that User only, not for one made
   * again under the name (`givenToEarlierUser`), and goes when the User is deleted.
   */
  private async mintKey(
    owner: { name: string; uid: string | undefined },
    identity: ExternalIdentity,
  ): Promise<MintedLogin> {
    const user = owner.name;
    const { key } = generateAccessKey(this.deps.random);
    const body: OwnedAccessKey = {
      apiVersion: GROUP_VERSION,
      kind: 'OwnedAccessKey',
      metadata: {
        generateName: 'login-',
        ...(owner.uid
          ? { ownerReferences: [{ apiVersion: GROUP_VERSION, kind: 'User', name: user, uid: owner.uid }] }
          : {}),
      },
      spec: {
        user,
        type: 'Login',
        key,
        displayName: `sign-in through ${identity.connector}`,
        identity: keyIdentity(identity),
        identityRefresh: new Date(this.now()).toISOString(),
      },
    };
    const created = await this.deps.api.request<OwnedAccessKey>({
      method: 'POST',
      path: collectionPath(resources.ownedAccessKeys),
      body,
    });
    return { key, keyName: created.metadata.name ?? '', user };
  }
}
