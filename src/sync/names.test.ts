import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROTOTYPE_LABEL_KEYS, recordWithPrototypeKeys } from '../../test-support/prototype-keys.ts';
import {
  base36Encode,
  hostLabelKey,
  hostLabels,
  hostNameLong,
  hostNameShort,
  hostServiceSelector,
  safeConcatName,
  virtualLabelKey,
  virtualLabels,
} from './names.ts';

describe('host names (reference vectors)', () => {
  it.each([
    ['a', 'b', 'suffix', 'a-x-b-x-suffix'],
    ['my-pod', '', 'my-vc', 'my-pod-x--x-my-vc'],
    // the real hashed name from upstream issue #29: the cut ends in "-", so "--" remains
    [
      'rook-nfs-operator-5fd99c7c8-dcnnj',
      'rook-nfs-system',
      'vcluster-1',
      'rook-nfs-operator-5fd99c7c8-dcnnj-x-rook-nfs-system--b1cadd30c5',
    ],
  ])('hostNameLong(%s, %s, %s) = %s', (name, ns, vc, expected) => {
    expect(hostNameLong(name, ns, vc)).toBe(expected);
  });

  it('keeps exactly 63 characters and hashes 64', () => {
    const name63 = `${'a'.repeat(63 - '-x-ns-x-vc'.length)}`;
    expect(hostNameLong(name63, 'ns', 'vc')).toHaveLength(63);
    expect(hostNameLong(name63, 'ns', 'vc')).toBe(`${name63}-x-ns-x-vc`);
    const long = hostNameLong(`${name63}b`, 'ns', 'vc');
    expect(long).toHaveLength(63);
    expect(long.slice(0, 52)).toBe(`${name63}b`.slice(0, 52));
  });

  it('collapses ".-" only in the hashed branch (62 characters)', () => {
    const name = `${'a'.repeat(51)}.bbbbbbbbbbbbbbbb`;
    const out = safeConcatName(name, 'x', 'ns', 'x', 'vc');
    expect(out).toHaveLength(62);
    expect(out.startsWith(`${'a'.repeat(51)}-`)).toBe(true);
    expect(safeConcatName('a.', 'b')).toBe('a.-b');
  });

  it('empty name maps to empty', () => {
    expect(hostNameLong('', 'ns', 'vc')).toBe('');
    expect(hostNameShort('', 'ns', 'vc')).toBe('');
  });
});

describe('short names', () => {
  it('base36 is big-endian with one 0 per leading zero byte', () => {
    expect(base36Encode(new Uint8Array([0, 0, 1]))).toBe('001');
    expect(base36Encode(new Uint8Array([1, 0]))).toBe((256).toString(36));
    expect(base36Encode(new Uint8Array([255, 255]))).toBe((65535).toString(36));
    expect(base36Encode(new Uint8Array([0]))).toBe('0');
  });

  it('is v + 13 base36 characters of sha256(name-x-ns-x-vc)', () => {
    const short = hostNameShort('my-claim', 'default', 'suffix');
    expect(short).toMatch(/^v[0-9a-z]{13}$/);
    expect(short).toBe(hostNameShort('my-claim', 'default', 'suffix'));
    expect(short).not.toBe(hostNameShort('my-claim', 'default', 'other'));
  });
});

describe('label keys (reference vectors, our prefix)', () => {
  it.each([
    ['release', 'vcluster.platform/label-suffix-x-a4d451ec23'],
    ['app', 'app'],
    ['vcluster.loft.sh/namespace', 'vcluster.loft.sh/namespace'],
  ])('hostLabelKey(%s)', (key, expected) => {
    expect(hostLabelKey(key, 'suffix')).toBe(expected);
  });

  it('translates our own marker keys and maps them back', () => {
    for (const key of [
      'release',
      'vcluster.platform/namespace',
      'vcluster.platform/managed-by',
      'vcluster.platform/controlled-by',
    ]) {
      const host = hostLabelKey(key, 'suffix');
      expect(host).toMatch(/^vcluster\.platform\/label-suffix-x-[0-9a-f]{10}$/);
      expect(virtualLabelKey(host, 'suffix')).toBe(key);
      expect(virtualLabelKey(key, 'suffix')).toBeNull();
    }
    expect(virtualLabelKey('app', 'suffix')).toBe('app');
  });

  it('hostLabels adds markers for metadata, drops already translated keys, keeps controlled-by', () => {
    const translated = hostLabelKey('release', 'vc');
    expect(
      hostLabels(
        { app: 'a', release: 'r', [translated]: 'evil' },
        { 'vcluster.platform/controlled-by': 'x' },
        'ns',
        true,
        'vc',
      ),
    ).toEqual({
      app: 'a',
      [translated]: 'r',
      'vcluster.platform/managed-by': 'vc',
      'vcluster.platform/namespace': 'ns',
      'vcluster.platform/controlled-by': 'x',
    });
    expect(hostLabels(null, null, 'ns', true, 'vc')).toBeUndefined();
    expect(hostLabels({ a: 'b' }, { x: 'y' }, 'ns', false, 'vc')).toEqual({ a: 'b' });
  });

  it('virtualLabels removes markers and namespace labels', () => {
    expect(
      virtualLabels(
        {
          app: 'a',
          [hostLabelKey('release', 'vc')]: 'r',
          'vcluster.platform/managed-by': 'vc',
          'vcluster.platform/namespace': 'ns',
          'vcluster.platform/ns-label-vc-x-0123456789': 'n',
          release: 'raw',
        },
        'vc',
      ),
    ).toEqual({ app: 'a', release: 'r' });
  });

  it('service selectors gain the marker labels', () => {
    expect(hostServiceSelector({ app: 'web' }, 'default', 'vc')).toEqual({
      app: 'web',
      'vcluster.platform/managed-by': 'vc',
      'vcluster.platform/namespace': 'default',
    });
  });
});

const dnsLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);

describe('properties', () => {
  it('labels named like Object.prototype members go to the host and come back unchanged', () => {
    const labels = recordWithPrototypeKeys(fc.constantFrom<string>('x', 'y'), {
      prototypeKeys: PROTOTYPE_LABEL_KEYS,
      otherKeys: fc.constantFrom('app', 'release', 'example.com/team'),
    });
    const textOf = (m: Record<string, string> | undefined) => JSON.stringify(Object.entries(m ?? {}).sort());
    fc.assert(
      fc.property(labels, (virtual) => {
        const host = hostLabels(virtual, null, 'ns', true, 'vc');
        expect(textOf(virtualLabels(host, 'vc'))).toBe(textOf(virtual));
        // An absent marker is absent, not an inherited member: only the markers are added.
        expect(Object.keys(host ?? {}).length).toBe(Object.keys(virtual).length + 2);
      }),
      { examples: [[{ constructor: 'x', toString: 'y' }]] },
    );
  });

  it('translated names are valid DNS labels of at most 63 characters', () => {
    fc.assert(
      fc.property(dnsLabel, dnsLabel, dnsLabel, (name, ns, vc) => {
        const long = hostNameLong(name, ns, vc);
        expect(long.length).toBeLessThanOrEqual(63);
        expect(long).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
        expect(hostNameShort(name, ns, vc)).toMatch(/^v[0-9a-z]{13}$/);
      }),
    );
  });

  it('different inputs give different names unless the name was hashed', () => {
    fc.assert(
      fc.property(dnsLabel, dnsLabel, dnsLabel, dnsLabel, (a, b, ns, vc) => {
        fc.pre(a !== b);
        const x = hostNameLong(a, ns, vc);
        const y = hostNameLong(b, ns, vc);
        const hashed = `${a}-x-${ns}-x-${vc}`.length > 63 || `${b}-x-${ns}-x-${vc}`.length > 63;
        if (!hashed) expect(x).not.toBe(y);
        expect(hostNameShort(a, ns, vc)).not.toBe(hostNameShort(b, ns, vc));
      }),
    );
  });
});
