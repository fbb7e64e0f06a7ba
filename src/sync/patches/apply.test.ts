// biome-ignore-all lint/suspicious/noExplicitAny: the tests walk loosely typed JSON objects
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: template-literal expressions under test
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { recordWithPrototypeKeys } from '../../../test-support/prototype-keys.ts';
import { loadSyncConfig, type PatchConfig } from '../config.ts';
import { createSandbox } from '../sync.ts';
import type { SyncContext } from '../sync-context.ts';
import {
  applyPatches,
  mayReadObjects,
  type PatchRun,
  RestrictedFieldPatched,
  WholeObjectPatchInvalid,
} from './apply.ts';
import type { JsonObject } from './merge-patch.ts';

const ctx: SyncContext = { vclusterName: 'vc', hostNamespace: 'vc-ns', config: loadSyncConfig('') };
/** Limits no expression here comes near, whatever the machine's load. */
const sandbox = createSandbox(ctx, { timeoutMs: 2000, objectTimeoutMs: 4000 });
afterAll(() => sandbox.dispose());

const run = (patches: PatchConfig[], document: JsonObject, over: Partial<PatchRun> = {}): PatchRun => ({
  direction: 'toHost',
  listName: 'sync.toHost.secrets.patches',
  patches,
  ctx,
  sandbox,
  document,
  isMergePatch: false,
  hostObject: null,
  virtualObject: null,
  ...over,
});

/** Calls into the isolate that `fn` made. */
function callsDuring(fn: () => void): number {
  const before = sandbox.callsMade;
  fn();
  return sandbox.callsMade - before;
}

const service = (): JsonObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'shop', labels: { app: 'web' }, annotations: { owner: 'payments' } },
  spec: {
    ports: [
      { name: 'http', port: 80 },
      { name: 'metrics', port: 9090 },
    ],
    selector: { app: 'web' },
  },
});

describe('one call into the sandbox per object', () => {
  it('five patches on one object: one call', () => {
    const doc = service();
    const patches: PatchConfig[] = [
      { path: 'metadata.annotations.owner', expression: '"team-" + value' },
      { path: 'metadata.labels.app', expression: 'value + "-" + context.vcluster.name' },
      { path: 'spec.ports[*].name', expression: '"tenant-" + value' },
      { path: 'spec.ports[*].port', expression: 'value + 1' },
      { path: 'spec.selector', expression: '({ ...value, tier: "web" })' },
    ];
    expect(callsDuring(() => applyPatches(run(patches, doc)))).toBe(1);
    expect(doc).toMatchObject({
      metadata: { labels: { app: 'web-vc' }, annotations: { owner: 'team-payments' } },
      spec: {
        ports: [
          { name: 'tenant-http', port: 81 },
          { name: 'tenant-metrics', port: 9091 },
        ],
        selector: { app: 'web', tier: 'web' },
      },
    });
  });

  it('a `*` over 20 elements: one call', () => {
    const doc: JsonObject = {
      subsets: [{ addresses: Array.from({ length: 20 }, (_, i) => ({ ip: `10.0.0.${i}` })) }],
    };
    const patches: PatchConfig[] = [
      { path: 'subsets[*].addresses[*].ip', expression: 'value.replace(/^10\\./, "192.")' },
    ];
    expect(callsDuring(() => applyPatches(run(patches, doc)))).toBe(1);
    expect((doc.subsets as any)[0].addresses.map((a: { ip: string }) => a.ip)).toEqual(
      Array.from({ length: 20 }, (_, i) => `192.0.0.${i}`),
    );
  });

  it('a patch inside what a pending patch changes waits for it (a second call), and sees its result', () => {
    const doc = service();
    const patches: PatchConfig[] = [
      { path: 'spec.ports', expression: 'value.filter((p) => p.name !== "metrics")' },
      { path: 'spec.ports[*].name', expression: 'value + "-" + context.path' },
    ];
    expect(callsDuring(() => applyPatches(run(patches, doc)))).toBe(2);
    expect((doc.spec as any).ports).toEqual([{ name: 'http-spec.ports.0.name', port: 80 }]);
  });

  it('a reference patch between two expression patches does not split their call', () => {
    const doc = service();
    (doc.metadata as any).annotations.tls = 'web-tls';
    const patches: PatchConfig[] = [
      { path: 'metadata.annotations.owner', expression: '"team-" + value' },
      { path: 'metadata.annotations.tls', reference: { apiVersion: 'v1', kind: 'Secret' } },
      { path: 'metadata.labels.app', expression: 'value + "!"' },
    ];
    const virtualObject = { metadata: { namespace: 'shop' } };
    expect(callsDuring(() => applyPatches(run(patches, doc, { virtualObject })))).toBe(1);
    expect((doc.metadata as any).annotations).toEqual({ owner: 'team-payments', tls: 'web-tls-x-shop-x-vc' });
    expect((doc.metadata as any).labels.app).toBe('web!');
  });

  it('evaluating together gives what evaluating one patch after the other gives', () => {
    const pool: PatchConfig[] = [
      { path: 'a', expression: 'typeof value === "number" ? value * 2 : value' },
      { path: 'b[*]', expression: 'typeof value === "number" && value % 2 ? null : value' },
      { path: 'b', expression: 'Array.isArray(value) ? value.concat([7]) : value' },
      { path: 'c.*', expression: 'JSON.stringify(value).length' },
      { path: 'c.x', expression: 'null' },
      { path: 'c', expression: '({ ...value, y: 1 })' },
      { path: 'b[0]', expression: 'null' },
      { path: 'd', reference: { apiVersion: 'v1', kind: 'Secret' } },
      { path: '', expression: '({ e: context.path })' },
    ];
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.integer({ min: 0, max: 9 }),
        fc.constantFrom('s', 'name'),
        fc.array(tie('value'), { maxLength: 3 }),
        recordWithPrototypeKeys(tie('value'), { otherKeys: fc.constantFrom('x', 'y', 'z'), maxKeys: 3 }),
      ),
    })).value;
    const doc = fc.record({
      a: json,
      b: json,
      c: json,
      d: fc.constantFrom('s1', 's2'),
    }) as fc.Arbitrary<JsonObject>;
    fc.assert(
      fc.property(doc, fc.shuffledSubarray(pool), (document, patches) => {
        const together = structuredClone(document);
        applyPatches(run(patches, together, { virtualObject: { metadata: { namespace: 'ns' } } }));
        const oneByOne = structuredClone(document);
        for (const patch of patches) {
          applyPatches(run([patch], oneByOne, { virtualObject: { metadata: { namespace: 'ns' } } }));
        }
        expect(together).toEqual(oneByOne);
        expect(JSON.stringify(together)).toBe(JSON.stringify(oneByOne));
      }),
      { numRuns: 150 },
    );
  });
});

describe('keys named like Object.prototype members', () => {
  it('the whole object takes a `__proto__`, `constructor` or `toString` field as a field', () => {
    const doc: JsonObject = { data: { a: '1' } };
    applyPatches(
      run(
        [
          {
            path: '',
            expression: 'JSON.parse(\'{"__proto__": {"x": 1}, "constructor": "c", "toString": null}\')',
          },
        ],
        doc,
      ),
    );
    expect(JSON.stringify(doc)).toBe('{"data":{"a":"1"},"__proto__":{"x":1},"constructor":"c"}');
    expect(Object.getPrototypeOf(doc)).toBe(Object.prototype);
  });

  it('a value holding a `__proto__` key goes into the sandbox and comes back with it', () => {
    const doc: JsonObject = { spec: JSON.parse('{"__proto__": {"a": 1}, "constructor": {"b": 2}}') };
    applyPatches(run([{ path: 'spec', expression: '({ ...value, own: Object.keys(value).join() })' }], doc));
    expect(JSON.stringify(doc)).toBe(
      '{"spec":{"__proto__":{"a":1},"constructor":{"b":2},"own":"__proto__,constructor"}}',
    );
  });

  it('a data key `__proto__` is set and, in a merge patch, removed as any other key', () => {
    const doc: JsonObject = { data: JSON.parse('{"__proto__": "1", "constructor": "2"}') };
    applyPatches(run([{ path: 'data.*', expression: 'value + "!"' }], doc));
    expect(JSON.stringify(doc)).toBe('{"data":{"__proto__":"1!","constructor":"2!"}}');
    applyPatches(run([{ path: 'data["__proto__"]', expression: 'null' }], doc, { isMergePatch: true }));
    expect(JSON.stringify(doc)).toBe('{"data":{"__proto__":null,"constructor":"2!"}}');
  });
});

describe('the whole object (path "")', () => {
  it('takes the fields the result gives; the others stay, null removes one', () => {
    const doc = service();
    applyPatches(
      run([{ path: '', expression: '({ spec: { ...value.spec, type: "ClusterIP" }, status: null })' }], doc),
    );
    expect(doc).toEqual({ ...service(), spec: { ...(service().spec as JsonObject), type: 'ClusterIP' } });
  });

  it('in a merge patch, null stays null (it deletes the field on the target)', () => {
    const doc: JsonObject = { spec: { x: 1 } };
    applyPatches(run([{ path: '', expression: '({ spec: null })' }], doc, { isMergePatch: true }));
    expect(doc).toEqual({ spec: null });
  });

  it('anything but an object fails the object', () => {
    expect(() => applyPatches(run([{ path: '', expression: 'null' }], service()))).toThrow(
      WholeObjectPatchInvalid,
    );
    expect(() => applyPatches(run([{ path: '', expression: '[1]' }], service()))).toThrow(
      new WholeObjectPatchInvalid('sync.toHost.secrets.patches[0].expression'),
    );
  });
});

describe('fields no patch may change', () => {
  const secret = (): JsonObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: 's', namespace: 'ns', annotations: { a: '1' } },
    data: { k: 'dg==' },
  });

  it.each([
    ['type', '({ type: "kubernetes.io/service-account-token" })'],
    ['kind', '({ kind: "ConfigMap" })'],
    [
      'metadata.ownerReferences',
      '({ metadata: { ...value.metadata, ownerReferences: [{ apiVersion: "v1", kind: "Secret", name: "x", uid: "u" }] } })',
    ],
    ['metadata.finalizers', '({ metadata: { ...value.metadata, finalizers: ["x"] } })'],
  ])('a whole-object patch that changes %s fails, naming the patch and the field', (field, expression) => {
    expect(() => applyPatches(run([{ path: '', expression }], secret()))).toThrow(
      new RestrictedFieldPatched('sync.toHost.secrets.patches[0].expression', field),
    );
  });

  it('also through a merge patch (an update) and on the way back', () => {
    const patch: PatchConfig = { path: '', expression: '({ type: "kubernetes.io/service-account-token" })' };
    expect(() => applyPatches(run([patch], { data: { k: 'dg==' } }, { isMergePatch: true }))).toThrow(
      RestrictedFieldPatched,
    );
    const back: PatchConfig = {
      path: '',
      reverseExpression: '({ type: "kubernetes.io/service-account-token" })',
    };
    expect(() => applyPatches(run([back], secret(), { direction: 'toVirtual' }))).toThrow(
      RestrictedFieldPatched,
    );
  });

  it('a whole-object patch that leaves them as they are is fine', () => {
    const doc = secret();
    applyPatches(run([{ path: '', expression: '({ ...value, data: { k: btoa("w") } })' }], doc));
    expect(doc.data).toEqual({ k: 'dw==' });
    expect(doc.type).toBe('Opaque');
  });
});

describe('the host and virtual objects are sent only to expressions that may read them', () => {
  it.each<[string, boolean]>([
    ['value + "-x-" + context.vcluster.name', false],
    ['`${value}-${context.path}`', false],
    ['btoa(value)', false],
    ['context.hostObject.metadata.name', true],
    ['context.virtualObject?.spec', true],
    ['context["hostObject"]', true],
    ['(({ hostObject }) => hostObject)(context)', true],
    ['context .vcluster.name + context.hostObject', true],
    ['arguments[2].hostObject', true],
    ['eval("context.hostObject")', true],
    ['\\u0063ontext.hostObject', true],
  ])('%s: %s', (expression, expected) => {
    expect(mayReadObjects(expression)).toBe(expected);
  });

  it('an expression that does read them gets them', () => {
    const doc = service();
    applyPatches(
      run(
        [{ path: 'metadata.annotations.owner', expression: 'arguments[2].hostObject.metadata.name' }],
        doc,
        {
          hostObject: { metadata: { name: 'host-name' } },
        },
      ),
    );
    expect((doc.metadata as any).annotations.owner).toBe('host-name');
  });
});
