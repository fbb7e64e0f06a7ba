/**
 * JavaScript that runs inside each sandbox isolate before any expression. It is plain source
 * text on purpose: nothing from the host process (no function, no Reference) is ever placed in the
 * isolate; the helpers are re-implemented here and checked against the TypeScript implementation
 * by tests. It then closes every channel through which one evaluation could leave a value for a
 * later one, so that each starts from state no earlier one could touch (channels.test.ts tries
 * each): the legacy RegExp statics are removed, Math.random restarts at every evaluation, the
 * APIs that run code later or share memory are removed, and every intrinsic (also those only an
 * expression that makes one reaches, such as the iterator-helper prototype or the errors' stack
 * accessor) and the global object are frozen. Last it hands the embedder the runner that
 * evaluates one object's expressions per call (see sandbox.ts).
 */

export interface PreludeSettings {
  vclusterName: string;
  hostNamespace: string;
  clusterDomain: string;
  /** Multi-namespace mode: [virtual, host] rules, exact rules first; null in single-namespace mode. */
  namespaceRules: { virtual: string; host: string }[] | null;
  mappingsOnly: boolean;
  /** `context.vcluster` as seen by expressions (deep-frozen inside the isolate). */
  vcluster: unknown;
  maxOutputChars: number;
}

const PRELUDE = String.raw`
'use strict';
(function (settings, progressBuffer) {
  const K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ];

  function utf8Encode(text) {
    const bytes = [];
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
        const d = text.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); i++; }
        else c = 0xfffd;
      } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      if (c < 0x80) bytes.push(c);
      else if (c < 0x800) bytes.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) bytes.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else bytes.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return bytes;
  }

  function utf8Decode(bytes) {
    let out = '';
    let i = 0;
    const cont = (k) => k < bytes.length && (bytes[k] & 0xc0) === 0x80;
    while (i < bytes.length) {
      const b = bytes[i];
      let cp = 0xfffd;
      let len = 1;
      if (b < 0x80) cp = b;
      else if (b >= 0xc2 && b < 0xe0 && cont(i + 1)) { cp = ((b & 31) << 6) | (bytes[i + 1] & 63); len = 2; }
      else if (b >= 0xe0 && b < 0xf0 && cont(i + 1) && cont(i + 2)) {
        const v = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63);
        if (v >= 0x800 && (v < 0xd800 || v > 0xdfff)) { cp = v; len = 3; }
      } else if (b >= 0xf0 && b < 0xf5 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
        const v = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63);
        if (v >= 0x10000 && v <= 0x10ffff) { cp = v; len = 4; }
      }
      out += String.fromCodePoint(cp);
      i += len;
    }
    return out;
  }

  function sha256Hex(text) {
    const bytes = utf8Encode(text);
    const bitLength = bytes.length * 8;
    bytes.push(0x80);
    while (bytes.length % 64 !== 56) bytes.push(0);
    for (let s = 56; s >= 0; s -= 8) bytes.push(s >= 32 ? Math.floor(bitLength / 2 ** s) & 255 : (bitLength >>> s) & 255);
    const h = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];
    const w = new Array(64);
    const rotr = (x, n) => (x >>> n) | (x << (32 - n));
    for (let off = 0; off < bytes.length; off += 64) {
      for (let t = 0; t < 16; t++) {
        const j = off + t * 4;
        w[t] = ((bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3]) | 0;
      }
      for (let t = 16; t < 64; t++) {
        const s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >>> 3);
        const s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >>> 10);
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
      }
      let [a, b, c, d, e, f, g, hh] = h;
      for (let t = 0; t < 64; t++) {
        const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[t] + w[t]) | 0;
        const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + hh) | 0;
    }
    return h.map((x) => (x >>> 0).toString(16).padStart(8, '0')).join('');
  }

  function safeConcatName(parts) {
    const joined = parts.join('-');
    if (joined.length <= 63) return joined;
    return (joined.slice(0, 52) + '-' + sha256Hex(joined).slice(0, 10)).split('.-').join('-');
  }

  function mapNamespace(virtualNamespace) {
    const rules = settings.namespaceRules;
    if (rules === null) return null;
    for (const rule of rules) {
      if (!rule.virtual.endsWith('*') && rule.virtual === virtualNamespace) return rule.host;
    }
    for (const rule of rules) {
      if (rule.virtual.endsWith('*')) {
        const prefix = rule.virtual.slice(0, -1);
        if (virtualNamespace.startsWith(prefix) && virtualNamespace.length > prefix.length) {
          return rule.host.slice(0, -1) + virtualNamespace.slice(prefix.length);
        }
      }
    }
    return null;
  }

  function hostServiceName(name, namespace) {
    const mapped = mapNamespace(namespace);
    if (mapped !== null) return { name, namespace: mapped };
    if (settings.namespaceRules !== null && settings.mappingsOnly) return null;
    return { name: safeConcatName([name, 'x', namespace, 'x', settings.vclusterName]), namespace: settings.hostNamespace };
  }

  function virtualToHostDNS(input) {
    if (typeof input !== 'string') return input;
    const parts = input.split('.');
    if (parts.length < 3 || parts[2] !== 'svc' || parts[0] === '' || parts[1] === '') return input;
    const host = hostServiceName(parts[0], parts[1]);
    if (host === null) return input;
    const given = parts.slice(3).join('.');
    const domain = given === '' ? settings.clusterDomain : given;
    return host.name + '.' + host.namespace + '.svc.' + domain;
  }

  const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  function btoa(input) {
    const bytes = utf8Encode(String(input));
    let out = '';
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=';
      out += i + 2 < bytes.length ? B64[n & 63] : '=';
    }
    return out;
  }
  function atob(input) {
    let text = String(input).replace(/[\t\n\f\r ]/g, '');
    if (text.length % 4 === 0) text = text.replace(/==?$/, '');
    if (text.length % 4 === 1 || /[^A-Za-z0-9+/]/.test(text)) {
      throw new TypeError('atob: the string to be decoded is not correctly encoded');
    }
    const bytes = [];
    let buffer = 0;
    let bits = 0;
    for (const ch of text) {
      buffer = (buffer << 6) | B64.indexOf(ch);
      bits += 6;
      if (bits >= 8) { bits -= 8; bytes.push((buffer >> bits) & 255); }
    }
    return utf8Decode(bytes);
  }

  function deepFreeze(root) {
    const seen = new Set();
    const stack = [root];
    while (stack.length > 0) {
      const o = stack.pop();
      if ((typeof o !== 'object' && typeof o !== 'function') || o === null || seen.has(o)) continue;
      seen.add(o);
      Object.freeze(o);
      stack.push(Object.getPrototypeOf(o));
      for (const key of Reflect.ownKeys(o)) {
        const d = Object.getOwnPropertyDescriptor(o, key);
        if (d === undefined) continue;
        if ('value' in d) stack.push(d.value);
        else { stack.push(d.get); stack.push(d.set); }
      }
    }
  }

  // ---- Channels that freezing alone does not close ------------------------------------------
  // V8's legacy RegExp statics (RegExp.input, $1..$9, lastMatch...) are accessors over the
  // realm's last match, which every regular expression writes: after a freeze they still carry
  // a value from one evaluation to the next. Removed, not frozen.
  for (const key of [
    'input', '$_', 'lastMatch', '$&', 'lastParen', '$+', 'leftContext', '$\x60', 'rightContext', "$'",
    '$1', '$2', '$3', '$4', '$5', '$6', '$7', '$8', '$9',
  ]) {
    delete RegExp[key];
  }
  // No shared memory, no code outside JavaScript, no callbacks that run after an evaluation
  // (FinalizationRegistry) or observe the collector (WeakRef), no console of the embedder.
  for (const name of ['WebAssembly', 'SharedArrayBuffer', 'Atomics', 'FinalizationRegistry', 'WeakRef', 'console']) {
    delete globalThis[name];
  }
  // Math.random keeps its generator's state in the realm; ours starts again from the same seed at
  // every evaluation, so an evaluation can neither read nor steer what a later one draws.
  const SEED = 0x2545f491;
  let randomState = SEED;
  Object.defineProperty(Math, 'random', {
    value: function random() {
      let x = randomState;
      x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
      randomState = x;
      return (x >>> 0) / 4294967296;
    },
    writable: true, enumerable: false, configurable: true,
  });

  const vcluster = settings.vcluster;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const now = Date.now;
  const maxOutputChars = settings.maxOutputChars;
  const ErrorClass = Error;
  // [0] the evaluation in flight (its index in the batch; the batch's length once all returned),
  // [1] when it started (Date.now()). Shared with the embedder, which reads it when a batch is
  // cut short (time limit, memory limit); nothing in the isolate but this runner can reach it.
  const progress = new Float64Array(progressBuffer);

  /**
   * The context variable of one evaluation. hostObject and virtualObject are parsed from their
   * JSON text on first read, for this evaluation alone (each gets its own copy).
   */
  function makeContext(path, hostJson, virtualJson) {
    if (hostJson === null && virtualJson === null) return { vcluster, hostObject: null, virtualObject: null, path };
    let host;
    let hostRead = false;
    let virtual;
    let virtualRead = false;
    return {
      vcluster,
      get hostObject() {
        if (!hostRead) { host = hostJson === null ? null : parse(hostJson); hostRead = true; }
        return host;
      },
      set hostObject(value) { host = value; hostRead = true; },
      get virtualObject() {
        if (!virtualRead) { virtual = virtualJson === null ? null : parse(virtualJson); virtualRead = true; }
        return virtual;
      },
      set virtualObject(value) { virtual = value; virtualRead = true; },
      path,
    };
  }

  function describe(error) {
    try {
      if (error instanceof ErrorClass) {
        const name = String(error.name);
        return (name === 'Error' ? '' : name + ': ') + String(error.message);
      }
      return 'uncaught ' + String(error);
    } catch (_) {
      return 'an exception that cannot be described';
    }
  }

  const compiled = [];
  /** Keeps a compiled expression; returns its id. */
  function register(fn) {
    Object.freeze(fn);
    compiled.push(fn);
    return compiled.length - 1;
  }

  /**
   * Evaluates a batch: 'evaluations' is JSON text of [[expression id, context.path, value], ...].
   * Returns "[r0,r1,...]" (JSON text of each result; null for null, undefined or anything JSON
   * cannot hold), or "!" + JSON [index, kind, detail] for the first evaluation that failed
   * (kind: error, timeout (it returned, but later than limitMs), tooLarge).
   * Each evaluation gets fresh copies of its inputs, the same Math.random sequence and a context
   * whose hostObject/virtualObject are parsed for it alone: nothing one evaluation does reaches the next.
   */
  function run(evaluations, hostJson, virtualJson, limitMs) {
    const batch = parse(evaluations);
    const count = batch.length;
    const parts = new Array(count);
    let startedAt = now();
    for (let i = 0; i < count; i++) {
      const entry = batch[i];
      const context = makeContext(entry[1], hostJson, virtualJson);
      randomState = SEED;
      progress[0] = i;
      progress[1] = startedAt;
      // A plain call: "this" is undefined inside the expression, never the registry.
      const expression = compiled[entry[0]];
      let json;
      try {
        json = stringify(expression(entry[2], true, context));
      } catch (error) {
        return '!' + stringify([i, 'error', describe(error).slice(0, 2000)]);
      }
      const returnedAt = now();
      if (returnedAt - startedAt > limitMs) return '!' + stringify([i, 'timeout', returnedAt - startedAt]);
      startedAt = returnedAt;
      if (json === undefined) json = 'null';
      else if (json.length > maxOutputChars) return '!' + stringify([i, 'tooLarge', json.length]);
      parts[i] = json;
    }
    progress[0] = count;
    return '[' + parts.join(',') + ']';
  }

  const constant = (value) => ({ value, writable: false, enumerable: false, configurable: false });
  Object.defineProperties(globalThis, {
    atob: constant(atob),
    btoa: constant(btoa),
    virtualToHostDNS: constant(virtualToHostDNS),
  });

  // ---- Freeze every intrinsic, also those no property path from the global object reaches ----
  const unreachable = [];
  const probe = (make) => {
    try { unreachable.push(make()); } catch (_) { /* not in this V8 */ }
  };
  probe(() => Object.getPrototypeOf(function* () {}));
  probe(() => Object.getPrototypeOf(async function () {}));
  probe(() => Object.getPrototypeOf(async function* () {}));
  probe(() => Object.getPrototypeOf(async () => {}));
  probe(() => Object.getPrototypeOf([][Symbol.iterator]()));
  probe(() => Object.getPrototypeOf(new Map()[Symbol.iterator]()));
  probe(() => Object.getPrototypeOf(new Set()[Symbol.iterator]()));
  probe(() => Object.getPrototypeOf(''[Symbol.iterator]()));
  probe(() => Object.getPrototypeOf(/a/[Symbol.matchAll]('')));
  probe(() => Object.getPrototypeOf([].values().map((x) => x)));
  probe(() => Object.getPrototypeOf(Iterator.from({ next() { return { done: true }; } })));
  probe(() => Object.getPrototypeOf(new Intl.Segmenter().segment('')));
  probe(() => Object.getPrototypeOf(new Intl.Segmenter().segment('')[Symbol.iterator]()));
  probe(() => Object.getPrototypeOf(Int8Array));
  // The accessor V8 installs as "stack" on every error (and by Error.captureStackTrace).
  probe(() => Object.getOwnPropertyDescriptor(new Error(), 'stack'));
  probe(() => { const o = {}; Error.captureStackTrace(o); return Object.getOwnPropertyDescriptor(o, 'stack'); });
  probe(() => Object.getOwnPropertyDescriptor(function () {}, 'caller'));
  probe(() => (function () { 'use strict'; return Object.getOwnPropertyDescriptor(arguments, 'callee'); })());
  unreachable.push(vcluster);
  for (const o of unreachable) deepFreeze(o);
  deepFreeze(globalThis);

  return { run, register };
})
`;

/**
 * Source of the script that installs the helpers, closes the channels and freezes the realm.
 * Its completion value is a function of the SharedArrayBuffer for progress, returning the
 * runner: `{run, register}`.
 */
export function preludeSource(settings: PreludeSettings): string {
  return `${PRELUDE}.bind(undefined, ${JSON.stringify(settings)});`;
}
