import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonWithPrototypeKeys, objectKey, PROTOTYPE_KEYS } from '../../../test-support/prototype-keys.ts';
import {
  expandPath,
  getAt,
  InvalidPatchPath,
  type PathSegment,
  parsePath,
  pathMayReach,
  pathsIndependent,
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
    ['', []],
    ['  ', []],
  ])('%j', (text, expected) => {
    expect(parsePath(text)).toEqual(expected);
  });

  it.each([
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
  objectKey(fc.string({ minLength: 1, maxLength: 8 })).map((k) => ({ type: 'key' as const, key: k })),
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
      fc.property(jsonWithPrototypeKeys({ withNull: true }).value, (value) => {
        const all = expandPath({ v: value }, parsePath('v.*.*'));
        for (const concrete of all) {
          expect(expandPath({ v: value }, parsePath(printConcretePath(concrete)))).toEqual([concrete]);
        }
      }),
    );
  });
});

describe('keys named like Object.prototype members', () => {
  it.each(PROTOTYPE_KEYS)('%s names an own key or nothing, never an inherited member', (key) => {
    const path = parsePath(`data[${JSON.stringify(key)}]`);
    expect(expandPath({ data: {} }, path)).toEqual([]);
    expect(getAt({ data: {} }, ['data', key])).toBeUndefined();
    const doc = { data: JSON.parse(`{${JSON.stringify(key)}: "v"}`) };
    expect(expandPath(doc, path)).toEqual([['data', key]]);
    expect(getAt(doc, ['data', key])).toBe('v');
  });
});

describe('the whole object', () => {
  it('the empty path matches the object itself', () => {
    expect(expandPath({ a: 1 }, parsePath(''))).toEqual([[]]);
  });
});

describe('pathsIndependent', () => {
  it.each<[string, string, boolean]>([
    ['metadata.labels.a', 'metadata.annotations.a', true],
    ['spec.ports[*].name', 'spec.ports[*].port', true],
    ['spec.ports[0].name', 'spec.ports[1].port', true],
    ['subsets[*].addresses[*].ip', 'subsets[*].ports[*].name', true],
    ['data.0.x', 'data["0"].y', true],
    ['a.b', 'a.b', false],
    ['a.b', 'a["b"]', false],
    ['spec.ports', 'spec.ports[*].name', false],
    ['spec.ports[*].name', 'spec.ports', false],
    // Removing element 0 moves element 1.
    ['spec.ports[0]', 'spec.ports[1].name', false],
    ['spec.ports[*]', 'spec.ports[0].name', false],
    ['metadata.labels.*', 'metadata.labels.a', false],
    ['', 'metadata.labels.a', false],
    ['metadata.labels.a', '', false],
  ])('%j and %j: %s', (a, b, expected) => {
    expect(pathsIndependent(parsePath(a), parsePath(b))).toBe(expected);
    expect(pathsIndependent(parsePath(b), parsePath(a))).toBe(expected);
  });

  it('independent paths never name the same value or one inside the other', () => {
    const segment = fc.oneof(
      fc.constantFrom('a', 'b', '0').map((k) => key(k)),
      fc.constantFrom(0, 1).map((i) => index(i)),
      fc.constant(wildcard),
    );
    const doc = { a: { a: [{ a: 1, b: 2 }, { a: 3 }], b: { '0': 4 } }, b: [[5], { a: 6 }], '0': 7 };
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 4 }), fc.array(segment, { maxLength: 4 }), (a, b) => {
        if (!pathsIndependent(a, b)) return;
        const xs = expandPath(doc, a).map(printConcretePath);
        const ys = expandPath(doc, b).map(printConcretePath);
        for (const x of xs) {
          for (const y of ys) {
            const [shorter, longer] = x.length <= y.length ? [x, y] : [y, x];
            expect(longer === shorter || longer.startsWith(`${shorter}.`) || shorter === '').toBe(false);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});

describe('pathMayReach', () => {
  it.each<[string, string, boolean]>([
    ['type', 'type', true],
    ['metadata.finalizers[0]', 'metadata.finalizers', true],
    ['metadata', 'metadata.finalizers', true],
    ['metadata.*', 'metadata.ownerReferences', true],
    ['*', 'type', true],
    ['*.namespace', 'metadata.namespace', true],
    ['metadata.labels.*', 'metadata.finalizers', false],
    ['spec.type', 'type', false],
    ['', 'type', false],
  ])('%j reaches %j: %s', (path, field, expected) => {
    expect(pathMayReach(parsePath(path), field.split('.'))).toBe(expected);
  });
});
