import { describe, expect, test } from 'vitest';
import { InvalidTrustedProxies, TrustedProxies } from './source.ts';

describe('the client address behind trusted proxies', () => {
  const proxies = new TrustedProxies(['10.0.0.0/8', 'fd00::/8', '192.168.1.7']);

  test('without trusted proxies the peer is the client, whatever it sends', () => {
    const none = new TrustedProxies([]);
    expect(none.clientAddress('10.1.2.3', '1.2.3.4')).toBe('10.1.2.3');
    expect(none.clientSecure('10.1.2.3', false, 'https')).toBe(false);
  });

  test('a trusted peer vouches for the last hop it saw; untrusted peers vouch for nothing', () => {
    expect(proxies.clientAddress('10.1.2.3', '1.2.3.4')).toBe('1.2.3.4');
    expect(proxies.clientAddress('::ffff:10.1.2.3', '1.2.3.4')).toBe('1.2.3.4');
    // A client cannot choose its address: what it put in front is skipped over.
    expect(proxies.clientAddress('10.1.2.3', '6.6.6.6, 1.2.3.4')).toBe('1.2.3.4');
    // Chains of trusted proxies are walked back to the first untrusted address.
    expect(proxies.clientAddress('10.1.2.3', ['1.2.3.4, 192.168.1.7', '10.9.9.9'])).toBe('1.2.3.4');
    expect(proxies.clientAddress('5.5.5.5', '1.2.3.4')).toBe('5.5.5.5');
    expect(proxies.clientAddress('10.1.2.3', 'garbage')).toBe('10.1.2.3');
    expect(proxies.clientAddress('10.1.2.3', undefined)).toBe('10.1.2.3');
    expect(proxies.clientAddress('fd00::1', '2001:db8::1')).toBe('2001:db8::1');
  });

  test('HTTPS: the connection, or a trusted proxy that says so', () => {
    expect(proxies.clientSecure('5.5.5.5', true, undefined)).toBe(true);
    expect(proxies.clientSecure('10.1.2.3', false, 'https')).toBe(true);
    expect(proxies.clientSecure('10.1.2.3', false, 'https, http')).toBe(false);
    expect(proxies.clientSecure('5.5.5.5', false, 'https')).toBe(false);
  });

  test('bad CIDRs are refused', () => {
    for (const bad of ['10.0.0.0/33', 'nope', '10.0.0.0/x', '::/129']) {
      expect(() => new TrustedProxies([bad])).toThrow(InvalidTrustedProxies);
    }
  });
});
