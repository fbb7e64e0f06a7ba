import { describe, expect, it } from 'vitest';
import type { LoginHttpRequest } from './http-answers.ts';
import { MANAGEMENT_API_PATH, platformUrlFor, serverUrlFor } from './setup.ts';

/**
 * docs/login.md: kubeconfigs point at the gateway's external URL (`--issuer-url`'s origin) when it
 * has one, else at the URL the person reached the gateway at (e2e/login/gateway.test.ts shows the
 * latter through a real gateway).
 */
describe('the URL a sign-in hands out', () => {
  const request = (host: string | undefined, secure: boolean): LoginHttpRequest => ({
    method: 'POST',
    url: '/auth/password/login',
    headers: host === undefined ? {} : { host },
    source: '192.0.2.1',
    secure,
  });

  it('is the external URL when there is one, whatever the request reached', () => {
    expect(platformUrlFor(request('10.0.0.5:8443', true), 'https://platform.example.com/')).toBe(
      'https://platform.example.com',
    );
    expect(serverUrlFor(request('10.0.0.5:8443', false), 'https://platform.example.com')).toBe(
      `https://platform.example.com${MANAGEMENT_API_PATH}`,
    );
  });

  it('is the address the request reached otherwise, with its scheme', () => {
    expect(serverUrlFor(request('gw.internal:8443', true), undefined)).toBe(
      `https://gw.internal:8443${MANAGEMENT_API_PATH}`,
    );
    expect(platformUrlFor(request('gw.internal', false), undefined)).toBe('http://gw.internal');
  });
});
