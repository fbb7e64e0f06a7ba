import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROTOTYPE_KEYS, prototypeKey, recordWithPrototypeKeys } from '../../test-support/prototype-keys.ts';
import { OidcProviderSchema, SamlProviderSchema } from '../api/config-auth.ts';
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

describe("a provider's claim and attribute names are data (issue 29)", () => {
  // As openid-client hands the claims over: JSON.parse keeps `__proto__` as a claim of its own.
  const hostileClaims = () =>
    JSON.parse(
      JSON.stringify({ sub: 'u-1', preferred_username: 'mallory' }).replace(
        /}$/,
        ',"__proto__":["smuggled"],"constructor":"c","toString":["t"],"groups":["constructor","__proto__","toString"]}',
      ),
    ) as Record<string, unknown>;

  it('passes on allowed claims named like Object.prototype members as claims, never __proto__', () => {
    const claims = hostileClaims();
    expect(Object.hasOwn(claims, '__proto__')).toBe(true);
    const identity = identityFromClaims(
      'oidc',
      claims,
      oidc({ allowedExtraClaims: ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'] }),
    );
    expect(identity.groups).toEqual(['constructor', '__proto__', 'toString']);
    const extra = identity.extraClaims as Record<string, string[]>;
    expect(Object.getPrototypeOf(extra)).toBe(Object.prototype);
    expect(Object.entries(extra)).toEqual([
      ['constructor', ['c']],
      ['toString', ['t']],
    ]);
  });

  it('reads only claims of their own: what an object inherits is not a claim', () => {
    // Claims whose prototype carries values, as assigning a claim named __proto__ would leave them.
    const claims = Object.assign(Object.create({ groups: ['admins'], email: 'boss@example.com' }), {
      sub: 'u-1',
      email_verified: true,
    }) as Record<string, unknown>;
    const identity = identityFromClaims('oidc', claims, oidc({ allowedExtraClaims: ['groups'] }));
    expect(identity).toMatchObject({ username: 'u-1', groups: [], email: undefined, extraClaims: undefined });
  });

  it('maps claims named by any Object.prototype member exactly as sent, absent ones as absent', () => {
    const claimValue = fc.oneof(
      fc.string({ minLength: 1, maxLength: 8 }),
      fc.array(fc.string({ minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 3 }),
    );
    fc.assert(
      fc.property(
        recordWithPrototypeKeys(claimValue, {
          otherKeys: fc.string({ maxLength: 4 }).filter((k) => k !== 'sub'),
        }),
        prototypeKey(),
        prototypeKey(),
        (sent, groupsClaim, emailClaim) => {
          const claims: Record<string, unknown> = { sub: 'u-1', ...sent };
          const own = (name: string) => (Object.hasOwn(claims, name) ? claims[name] : undefined);
          const identity = identityFromClaims(
            'oidc',
            claims,
            oidc({ groupsClaim, emailClaim, allowedExtraClaims: [...PROTOTYPE_KEYS] }),
          );
          const groups = own(groupsClaim);
          expect(identity.groups).toEqual(groups === undefined ? [] : [groups].flat());
          const email = own(emailClaim);
          expect(identity.email).toBe(typeof email === 'string' ? email : undefined);
          const extra = identity.extraClaims ?? {};
          expect(Object.getPrototypeOf(extra)).toBe(Object.prototype);
          expect(Object.keys(extra).sort()).toEqual(
            Object.keys(sent)
              .filter((name) => name !== '__proto__' && (PROTOTYPE_KEYS as readonly string[]).includes(name))
              .sort(),
          );
          for (const [name, values] of Object.entries(extra)) expect(values).toEqual([own(name)].flat());
        },
      ),
    );
  });

  it('reads only attributes of their own: an attribute named __proto__ smuggles no groups', () => {
    // What node-saml's `profileAttributes[name] = value` does with an attribute named __proto__
    // whose value has child elements: the value becomes the prototype of the attributes.
    const attributes: Record<string, unknown> = { uid: 'mallory', constructor: 'c', toString: ['t'] };
    Object.setPrototypeOf(attributes, { roles: ['admins'], mail: 'boss@example.com' });
    const identity = identityFromSaml(
      'saml',
      { nameID: 'mallory@example.com', attributes },
      saml({ usernameAttr: 'uid', emailAttr: 'mail', groupsAttr: 'roles' }),
    );
    expect(identity).toEqual({
      connector: 'saml',
      userId: 'mallory@example.com',
      username: 'mallory',
      email: undefined,
      groups: [],
    });
    const named = identityFromSaml(
      'saml',
      { nameID: 'mallory@example.com', attributes },
      saml({ usernameAttr: 'constructor', groupsAttr: 'toString' }),
    );
    expect(named).toMatchObject({ username: 'c', groups: ['t'] });
    const absent = identityFromSaml(
      'saml',
      { nameID: 'mallory@example.com', attributes: { uid: 'mallory' } },
      saml({ groupsAttr: 'valueOf' }),
    );
    expect(absent.groups).toEqual([]);
  });
});
