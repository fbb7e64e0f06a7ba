import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * The client's address, for the throttle and the audit log. The peer's address, unless the peer
 * is one of the trusted proxies (`--trusted-proxies`, CIDRs): then `X-Forwarded-For` is read from
 * the right (each proxy appends the address it received from), skipping the trusted proxies, and
 * the first address that is not one is the client. A client cannot choose its own address by
 * sending the header: it is believed only as far as trusted proxies vouch for it.
 */

/** `--trusted-proxies` could not be read. */
export class InvalidTrustedProxies extends Error {
  override readonly name = 'InvalidTrustedProxies';
}

export class TrustedProxies {
  private readonly list = new BlockList();
  readonly empty: boolean;

  /** `cidrs`: `10.0.0.0/8`, `fd00::/8`, or single addresses. */
  constructor(cidrs: readonly string[]) {
    for (const entry of cidrs) {
      const text = entry.trim();
      if (text === '') continue;
      const [address = '', bits] = text.split('/');
      const family = isIPv4(address) ? 'ipv4' : isIPv6(address) ? 'ipv6' : undefined;
      const prefix = bits === undefined ? (family === 'ipv4' ? 32 : 128) : Number(bits);
      const max = family === 'ipv4' ? 32 : 128;
      if (
        !family ||
        !Number.isInteger(prefix) ||
        prefix < 0 ||
        prefix > max ||
        (bits !== undefined && !/^\d+$/.test(bits))
      ) {
        throw new InvalidTrustedProxies(`not a CIDR or an address: ${JSON.stringify(text)}`);
      }
      this.list.addSubnet(address, prefix, family);
    }
    this.empty = cidrs.every((entry) => entry.trim() === '');
  }

  trusts(address: string): boolean {
    const plain = unmapped(address);
    const family = isIPv4(plain) ? 'ipv4' : isIPv6(plain) ? 'ipv6' : undefined;
    return family !== undefined && this.list.check(plain, family);
  }

  /**
   * Whether the client used HTTPS: the connection is TLS, or the peer is a trusted proxy whose
   * `X-Forwarded-Proto` (its last value: the proxy's own) says `https`.
   */
  clientSecure(peer: string, tls: boolean, forwardedProto: string | string[] | undefined): boolean {
    if (tls) return true;
    if (this.empty || forwardedProto === undefined || !this.trusts(unmapped(peer))) return false;
    const values = (Array.isArray(forwardedProto) ? forwardedProto.join(',') : forwardedProto).split(',');
    return values[values.length - 1]?.trim().toLowerCase() === 'https';
  }

  /** The client behind `peer`, given the request's `X-Forwarded-For` header(s). */
  clientAddress(peer: string, forwardedFor: string | string[] | undefined): string {
    const address = unmapped(peer);
    if (this.empty || forwardedFor === undefined || !this.trusts(address)) return address;
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
      .split(',')
      .map((hop) => unmapped(hop.trim()));
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i] ?? '';
      if (!isIPv4(hop) && !isIPv6(hop)) return address; // a malformed chain vouches for nothing
      if (!this.trusts(hop)) return hop;
    }
    // Every hop is a trusted proxy: the first one is as far as the chain goes.
    return hops[0] ?? address;
  }
}

/** `::ffff:10.0.0.1` is `10.0.0.1`. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && isIPv4(address.slice(7)) ? address.slice(7) : address;
}
