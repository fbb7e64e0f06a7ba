import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  expandPath,
  InvalidPatchPath,
  type PathSegment,
  parsePath,
  printConcretePath,
  printPath,
} from './path.ts';

const key = (k: string): PathSegment => ({ type: 'key', key: k });
const index = (i: number): PathSegment => ({ type: 'index', index: i });
const wildcard: PathSegment = { type: 'wildcard' };

describe('parsePath', () => {
  it.each<[string, PathSegment[]]>([
    ['a.b', [key('a'), key('b')]],
    ['metadata.annotations["a.b/c"]', [key('metadata'), key('annotations'), key('a.b/c')]],
    ["metadata.labels['x.y']", [key('metadata'), key('labels'), key('x.y')]],
    ['a[0]', [key('a'), index(0)]],
    ['a.0', [key('a'), index(0)]],
    ['a[*]', [key('a'), wildcard]],
    ['a.*.b', [key('a'), wildcard, key('b')]],
    ['a.*', [key('a'), wildcard]],
    ['a."x.y".1', [key('a'), key('x.y'), index(1)]],
    ['a["x"]["y"]', [key('a'), key('x'), key('y')]],
    ['a["*"]', [key('a'), key('*')]],
    ['a["0"]', [key('a'), key('0')]],
    ['a["q\\"uote"]', [key('a'), key('q"uote')]],
    ['  spec.ports[1].port  ', [key('spec'), key('ports'), index(1), key('port')]],
    ['subsets[*].addresses[*].ip', [key('subsets'), wildcard, key('addresses'), wildcard, key('ip')]],
  ])('%s', (text, expected) => {
    expect(parsePath(text)).toEqual(expected);
  });

  it.each([
    ['', 'empty path'],
    ['a..b', 'empty segment'],
    ['.a', 'empty segment'],
    ['a.', 'empty segment'],
    ['a[[0]]', 'bracket inside bracket'],
    ['a[]', 'empty brackets'],
    ['a]', 'bracket close without bracket'],
    ['a["b', 'unclosed quote'],
    ['a[0', 'unclosed bracket'],
    ['a["b"x]', 'unclosed bracket'],
    ['a[b]', 'bracket holds neither'],
    ['a[-1]', 'bracket holds neither'],
    ['a[0]b', 'expected'],
    ['"a"b', 'expected'],
    ['a b', 'whitespace'],
  ])('rejects %j (%s)', (text, reason) => {
    expect(() => parsePath(text)).toThrow(InvalidPatchPath);
    expect(() => parsePath(text)).toThrow(reason);
  });
});

describe('expandPath', () => {
  const doc = {
    subsets: [{ addresses: [{ ip: '1' }, { ip: '2' }] }, { addresses: [{ ip: '3' }] }, { ports: [] }],
    metadata: { annotations: { 'a.b/c': 'x', d: null }, labels: { '0': 'zero' } },
  };
  it.each<[string, (string | number)[][]]>([
    [
      'subsets[*].addresses[*].ip',
      [
        ['subsets', 0, 'addresses', 0, 'ip'],
        ['subsets', 0, 'addresses', 1, 'ip'],
        ['subsets', 1, 'addresses', 0, 'ip'],
      ],
    ],
    [
      'metadata.annotations.*',
      [
        ['metadata', 'annotations', 'a.b/c'],
        ['metadata', 'annotations', 'd'],
      ],
    ],
    ['metadata.annotations["a.b/c"]', [['metadata', 'annotations', 'a.b/c']]],
    ['metadata.annotations.missing', []],
    ['subsets[5]', []],
    ['subsets[0].addresses[0].ip.deeper', []],
    ['metadata.labels.0', [['metadata', 'labels', '0']]],
    ['subsets.1.addresses', [['subsets', 1, 'addresses']]],
  ])('%s', (path, expected) => {
    expect(expandPath(doc, parsePath(path))).toEqual(expected);
  });

  it('prints concrete paths with keys quoted where needed and bare indexes', () => {
    expect(printConcretePath(['spec', 'rules', 'test.object.other', 0])).toBe(
      'spec.rules."test.object.other".0',
    );
    expect(printConcretePath(['metadata', 'labels', '0'])).toBe('metadata.labels."0"');
  });
});

const segmentArb: fc.Arbitrary<PathSegment> = fc.oneof(
  fc.string({ minLength: 1, maxLength: 8 }).map((k) => ({ type: 'key' as const, key: k })),
  fc.nat({ max: 1000 }).map((i) => ({ type: 'index' as const, index: i })),
  fc.constant({ type: 'wildcard' as const }),
);

describe('properties', () => {
  it('paths print and parse back to the same path', () => {
    fc.assert(
      fc.property(fc.array(segmentArb, { minLength: 1, maxLength: 6 }), (segments) => {
        expect(parsePath(printPath(segments))).toEqual(segments);
      }),
    );
  });

  it('every expanded concrete path prints to a path that finds exactly itself', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const all = expandPath({ v: value }, parsePath('v.*.*'));
        for (const concrete of all) {
          expect(expandPath({ v: value }, parsePath(printConcretePath(concrete)))).toEqual([concrete]);
        }
      }),
    );
  });
});
