import { describe, expect, it } from 'vitest';
import { OidcProviderSchema, SamlProviderSchema } from '../api/config.ts';
import {
  EmailNotVerified,
  IdentityIncomplete,
  identityFromClaims,
  identityFromSaml,
  NotInAllowedGroups,
  objectNameFor,
  ReservedUsername,
} from './identity.ts';

const oidc = (fields: Record<string, unknown> = {}) => OidcProviderSchema.parse(fields);
const saml = (fields: Record<string, unknown> = {}) => SamlProviderSchema.parse({ caData: 'x', ...fields });

describe('OIDC claims to identity', () => {
  const claims = {
    sub: 'u-123',
    preferred_username: 'alice',
    email: 'alice@example.com',
    email_verified: true,
    groups: ['dev', 'ops'],
    mail: 'a@corp',
    upn: 'alice@corp',
    department: 'R&D',
    nonce: 'n',
  };

  it('maps the default claims', () => {
    expect(identityFromClaims('oidc', claims, oidc())).toEqual({
      connector: 'oidc',
      userId: 'u-123',
      username: 'alice',
      preferredUsername: 'alice',
      email: 'alice@example.com',
      emailVerified: true,
      groups: ['dev', 'ops'],
      extraClaims: undefined,
    });
  });

  it('honours every claim name, the prefixes and allowedExtraClaims (only those)', () => {
    const identity = identityFromClaims(
      'corp',
      claims,
      oidc({
        usernameClaim: 'upn',
        platformUsernameClaim: 'email',
        preferredUsername: 'upn',
        emailClaim: 'mail',
        usernamePrefix: 'corp:',
        groupsClaim: 'groups',
        groupsPrefix: 'corp:',
        allowedExtraClaims: ['department', 'nonce', 'missing'],
      }),
    );
    expect(identity).toMatchObject({
      userId: 'alice@corp',
      username: 'corp:alice@example.com',
      preferredUsername: 'alice@corp',
      email: 'a@corp',
      groups: ['corp:dev', 'corp:ops'],
      extraClaims: { department: ['R&D'] },
    });
  });

  it('takes a groups claim that is a single string', () => {
    expect(identityFromClaims('o', { sub: 's', team: 'blue' }, oidc({ groupsClaim: 'team' })).groups).toEqual(
      ['blue'],
    );
  });

  it('requires one of `groups` (compared before the prefix)', () => {
    expect(() => identityFromClaims('o', claims, oidc({ groups: ['admins'] }))).toThrow(NotInAllowedGroups);
    expect(identityFromClaims('o', claims, oidc({ groups: ['ops'], groupsPrefix: 'x:' })).groups).toEqual([
      'x:dev',
      'x:ops',
    ]);
  });

  it('takes the email as the username only when the provider verified it, else the subject', () => {
    const { preferred_username: _, ...withoutUsername } = claims;
    expect(identityFromClaims('o', withoutUsername, oidc()).username).toBe('alice@example.com');
    expect(identityFromClaims('o', { ...withoutUsername, email_verified: false }, oidc()).username).toBe(
      'u-123',
    );
    const { email_verified: __, ...unstated } = withoutUsername;
    expect(identityFromClaims('o', unstated, oidc()).username).toBe('u-123');
    expect(identityFromClaims('o', { ...unstated, email_verified: 'true' }, oidc()).username).toBe('u-123');
    // Named explicitly, the email claim is refused when the provider says it is not verified
    // (kube-apiserver's rule for `claim: email`).
    expect(() =>
      identityFromClaims('o', { ...claims, email_verified: false }, oidc({ platformUsernameClaim: 'email' })),
    ).toThrow(EmailNotVerified);
    expect(
      identityFromClaims(
        'o',
        { ...claims, mail: 'm@corp' },
        oidc({ platformUsernameClaim: 'mail', emailClaim: 'mail' }),
      ).username,
    ).toBe('m@corp');
  });

  it('refuses identities without a subject, username, or with a reserved username', () => {
    expect(() => identityFromClaims('o', { email: 'e' }, oidc())).toThrow(IdentityIncomplete);
    expect(() => identityFromClaims('o', { sub: 's' }, oidc({ platformUsernameClaim: 'nick' }))).toThrow(
      IdentityIncomplete,
    );
    expect(() => identityFromClaims('o', { sub: 's', preferred_username: 'system:admin' }, oidc())).toThrow(
      ReservedUsername,
    );
    expect(() =>
      identityFromClaims(
        'o',
        { sub: 's', preferred_username: 'admins' },
        oidc({ usernamePrefix: 'platform:' }),
      ),
    ).toThrow(ReservedUsername);
  });
});

describe('SAML assertion to identity', () => {
  const profile = {
    nameID: 'alice@example.com',
    attributes: { uid: 'alice', mail: 'alice@example.com', memberOf: 'dev;ops;qa', roles: ['dev', 'ops'] },
  };

  it('maps NameID and the configured attributes', () => {
    expect(
      identityFromSaml(
        'saml',
        profile,
        saml({ usernameAttr: 'uid', emailAttr: 'mail', groupsAttr: 'roles' }),
      ),
    ).toEqual({
      connector: 'saml',
      userId: 'alice@example.com',
      username: 'alice',
      email: 'alice@example.com',
      groups: ['dev', 'ops'],
    });
    expect(identityFromSaml('saml', profile, saml()).username).toBe('alice@example.com');
  });

  it('splits groups on groupsDelim, requires allowedGroups and filters with filterGroups', () => {
    const config = { groupsAttr: 'memberOf', groupsDelim: ';' };
    expect(identityFromSaml('s', profile, saml(config)).groups).toEqual(['dev', 'ops', 'qa']);
    expect(() => identityFromSaml('s', profile, saml({ ...config, allowedGroups: ['admins'] }))).toThrow(
      NotInAllowedGroups,
    );
    expect(identityFromSaml('s', profile, saml({ ...config, allowedGroups: ['qa'] })).groups).toEqual([
      'dev',
      'ops',
      'qa',
    ]);
    expect(
      identityFromSaml('s', profile, saml({ ...config, allowedGroups: ['qa'], filterGroups: true })).groups,
    ).toEqual(['qa']);
  });

  it('refuses assertions without NameID or username attribute', () => {
    expect(() => identityFromSaml('s', { attributes: {} }, saml())).toThrow(IdentityIncomplete);
    expect(() => identityFromSaml('s', profile, saml({ usernameAttr: 'nope' }))).toThrow(IdentityIncomplete);
  });
});

describe('object names for usernames and groups', () => {
  const OBJECT_NAME = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

  it('keeps valid names and makes others valid and distinct', () => {
    expect(objectNameFor('alice')).toBe('alice');
    expect(objectNameFor('alice.smith')).toBe('alice.smith');
    const names = [
      'Alice',
      'alice@example.com',
      'alice-example.com',
      'corp:dev',
      'Ünïcode',
      '@@@',
      'a..b',
    ].map((n) => objectNameFor(n));
    for (const name of names) expect(name).toMatch(OBJECT_NAME);
    expect(new Set(names).size).toBe(names.length);
    const long = objectNameFor('X'.repeat(300));
    expect(long.length).toBeLessThanOrEqual(253);
    expect(long).toMatch(OBJECT_NAME);
  });

  it("never gives a valid name the name another text was given (issue 32's takeover by username)", () => {
    for (const text of ['Alice-Smith', 'alice@example.com', 'oidc:alice', 'X'.repeat(300)]) {
      const name = objectNameFor(text);
      expect(name).not.toBe(text);
      // Registering the name itself as a username lands elsewhere.
      expect(objectNameFor(name)).not.toBe(name);
      expect(objectNameFor(name)).toMatch(OBJECT_NAME);
    }
    // The old 32-bit suffix form is an ordinary valid name now, distinct from its origin's.
    expect(objectNameFor('alice-smith-2ca78191')).toBe('alice-smith-2ca78191');
    expect(objectNameFor('Alice-Smith')).not.toBe('alice-smith-2ca78191');
  });
});
