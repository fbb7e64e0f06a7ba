import { describe, expect, it } from 'vitest';
import type { User } from '../../api/identity.ts';
import {
  clientAuthenticationSubject,
  openIdProviderEnabled,
  providerClients,
  redirectAllowed,
  userClaims,
  wildcardRedirectMatches,
} from './clients.ts';

describe('the OpenID provider clients', () => {
  it('is enabled unless oidc.enabled is false (the spec: enabled by default)', () => {
    expect(openIdProviderEnabled({} as never)).toBe(true);
    expect(openIdProviderEnabled({ oidc: { enabled: true } } as never)).toBe(true);
    expect(openIdProviderEnabled({ oidc: {} } as never)).toBe(true);
    expect(openIdProviderEnabled({ oidc: { enabled: false } } as never)).toBe(false);
  });

  it('maps confidential and public clients, code and refresh grants only, ES256 ID tokens; skips clients without id and duplicates', () => {
    const clients = providerClients({
      clients: [
        { name: 'Argo CD', clientId: 'argocd', clientSecret: 's3cret', redirectURIs: ['https://argo/cb'] },
        { clientId: 'cli', redirectURIs: ['http://127.0.0.1:8000/cb'] },
        { clientId: 'argocd', clientSecret: 'other', redirectURIs: ['https://evil/cb'] },
        { name: 'no id', clientSecret: 'x' },
      ],
    });
    expect(clients).toEqual([
      {
        client_id: 'argocd',
        client_name: 'Argo CD',
        client_secret: 's3cret',
        redirect_uris: ['https://argo/cb'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
        id_token_signed_response_alg: 'ES256',
      },
      {
        client_id: 'cli',
        redirect_uris: ['http://127.0.0.1:8000/cb'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        id_token_signed_response_alg: 'ES256',
      },
    ]);
    expect(providerClients(undefined)).toEqual([]);
  });
});

describe('wildcard redirect URIs', () => {
  const pattern = 'https://*.apps.example.com/callback';

  it('lets * stand for characters within one part of the URL', () => {
    expect(wildcardRedirectMatches(pattern, 'https://argo.apps.example.com/callback')).toBe(true);
    expect(wildcardRedirectMatches(pattern, 'https://a-b.c.apps.example.com/callback')).toBe(true);
  });

  it('never lets * reach into another host, path, query, fragment or userinfo', () => {
    for (const uri of [
      'https://evil.com/x?.apps.example.com/callback',
      'https://evil.com#.apps.example.com/callback',
      'https://evil.com/.apps.example.com/callback',
      'https://user@evil.com:1.apps.example.com/callback',
      'https://evil.com\\.apps.example.com/callback',
      'https://.apps.example.com/callback',
      'https://argo.apps.example.com/callback/more',
      'http://argo.apps.example.com/callback',
    ])
      expect(wildcardRedirectMatches(pattern, uri), uri).toBe(false);
  });

  it('treats other characters of the pattern literally, and a pattern without * matches nothing here', () => {
    expect(wildcardRedirectMatches('https://*.example.com/cb', 'https://aXexample.com/cb')).toBe(false);
    expect(wildcardRedirectMatches('https://argo.example.com/cb', 'https://argo.example.com/cb')).toBe(false);
  });

  it('matches exactly without wildcards, and patterns only with them', () => {
    const registered = ['https://argo.example.com/cb', pattern];
    expect(redirectAllowed(registered, 'https://argo.example.com/cb', false)).toBe(true);
    expect(redirectAllowed(registered, 'https://argo.apps.example.com/callback', false)).toBe(false);
    expect(redirectAllowed(registered, 'https://argo.apps.example.com/callback', true)).toBe(true);
    expect(redirectAllowed(registered, 'https://argo.example.com/cb2', true)).toBe(false);
  });
});

describe('the claims of a User', () => {
  const user = (spec: Record<string, unknown>, teams?: string[]) =>
    ({
      apiVersion: 'management.platform/v1',
      kind: 'User',
      metadata: { name: 'alice' },
      spec,
      ...(teams ? { status: { teams } } : {}),
    }) as unknown as User;

  it('names the User, its username, email and groups as the platform computes them', () => {
    expect(
      userClaims(
        user(
          { username: 'Alice', displayName: 'Alice A.', email: 'a@example.com', groups: ['devs', 'ops'] },
          ['blue', 'devs'],
        ),
      ),
    ).toEqual({
      sub: 'alice',
      preferred_username: 'Alice',
      name: 'Alice A.',
      email: 'a@example.com',
      groups: ['devs', 'ops', 'platform:team:blue', 'platform:team:devs'],
    });
  });

  it('falls back to the object name, and claims no email it does not have', () => {
    expect(userClaims(user({}))).toEqual({
      sub: 'alice',
      preferred_username: 'alice',
      name: 'alice',
      groups: [],
    });
  });
});

describe('the client a token request authenticates as', () => {
  const basic = (user: string, secret: string) =>
    `Basic ${Buffer.from(`${user}:${secret}`).toString('base64')}`;

  it('is HTTP Basic’s user (form-encoded, RFC 6749 2.3.1), else the form’s client_id, as a subject no key has', () => {
    expect(clientAuthenticationSubject(basic('argo%20cd', 's'), '')).toBe('oidc-client:argo cd');
    expect(clientAuthenticationSubject(basic('argocd', 's'), 'client_id=other')).toBe('oidc-client:argocd');
    expect(clientAuthenticationSubject(undefined, 'grant_type=authorization_code&client_id=spa')).toBe(
      'oidc-client:spa',
    );
  });

  it('is undefined when the request names no client, or names it unreadably', () => {
    expect(clientAuthenticationSubject(undefined, 'grant_type=refresh_token')).toBeUndefined();
    expect(clientAuthenticationSubject('Bearer x', '')).toBeUndefined();
    expect(clientAuthenticationSubject(basic('%E0%A4%A', 's'), '')).toBeUndefined();
  });
});
