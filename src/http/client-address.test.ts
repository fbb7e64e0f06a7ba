import { describe, expect, test } from 'vitest';
import { sourceBucket } from './client-address.ts';

describe('sourceBucket', () => {
  test('an IPv4 address alone, an IPv4-mapped address as IPv4, IPv6 by its /64', () => {
    expect(sourceBucket('192.0.2.7')).toBe('192.0.2.7');
    expect(sourceBucket('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(sourceBucket('::ffff:c000:207')).toBe('192.0.2.7');
    expect(sourceBucket('0:0:0:0:0:ffff:c000:0207')).toBe('192.0.2.7');
    expect(sourceBucket('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(sourceBucket('2001:0db8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(sourceBucket('2001:db8:1:2::ffff:1.2.3.4')).toBe('2001:db8:1:2::/64');
    expect(sourceBucket('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(sourceBucket('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(sourceBucket('::1')).toBe('0:0:0:0::/64');
    // Neighbouring /64s and IPv4 addresses stay apart.
    expect(sourceBucket('2001:db8:1:3::1')).not.toBe(sourceBucket('2001:db8:1:2::1'));
    expect(sourceBucket('192.0.2.8')).not.toBe(sourceBucket('192.0.2.7'));
    expect(sourceBucket('not an address')).toBe('not an address');
  });
});
