import { describe, expect, it } from 'vitest';
import { authHeaders } from './endpoints.ts';

describe('authHeaders', () => {
  it('adds customHttpHeaders to the defaults, which they may override', () => {
    expect(authHeaders({ 'X-Login': 'yes', 'X-Frame-Options': 'SAMEORIGIN' })).toEqual({
      'cache-control': 'no-store',
      'x-frame-options': 'SAMEORIGIN',
      'x-login': 'yes',
    });
    expect(authHeaders(undefined)).toEqual({ 'cache-control': 'no-store', 'x-frame-options': 'DENY' });
  });

  it('leaves out headers that frame the answer and those no HTTP answer can carry', () => {
    expect(
      authHeaders({
        'Content-Length': '1',
        'Set-Cookie': 'a=b',
        Location: 'https://elsewhere.example',
        'Not A Header': 'x',
        'X-Split': 'one\r\nX-Injected: two',
        'X-Kept': 'kept',
      }),
    ).toEqual({ 'cache-control': 'no-store', 'x-frame-options': 'DENY', 'x-kept': 'kept' });
  });
});
