import { isIPv4, isIPv6 } from 'node:net';

/**
 * The bucket per-source limits count a client address in: an IPv4 address alone (an IPv4-mapped
 * IPv6 address, `::ffff:192.0.2.1`, is that IPv4 address), an IPv6 address by its /64 (written
 * `2001:db8:0:1::/64`), the smallest prefix a site is assigned (RFC 6177) and so one from which a
 * single client may take any number of addresses. Text that is no address is its own bucket.
 */
export function sourceBucket(address: string): string {
  if (isIPv4(address)) return address;
  const hextets = ipv6Hextets(address);
  if (hextets === undefined) return address;
  const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0] = hextets;
  if (a === 0 && b === 0 && c === 0 && d === 0 && e === 0 && f === 0xffff)
    return `${g >> 8}.${g & 0xff}.${h >> 8}.${h & 0xff}`;
  return `${[a, b, c, d].map((hextet) => hextet.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of an IPv6 address (zone dropped, `::` and a dotted IPv4 tail expanded). */
function ipv6Hextets(address: string): number[] | undefined {
  const plain = address.split('%')[0] ?? '';
  if (!isIPv6(plain)) return undefined;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(plain);
  const text = dotted
    ? `${plain.slice(0, dotted.index)}${((Number(dotted[1]) << 8) | Number(dotted[2])).toString(16)}:${((Number(dotted[3]) << 8) | Number(dotted[4])).toString(16)}`
    : plain;
  const [head = '', tail] = text.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const before = groups(head);
  const after = tail === undefined ? [] : groups(tail);
  const zeros = tail === undefined ? [] : new Array<string>(8 - before.length - after.length).fill('0');
  const all = [...before, ...zeros, ...after].map((group) => Number.parseInt(group, 16));
  return all.length === 8 && all.every((group) => group >= 0 && group <= 0xffff) ? all : undefined;
}
