import { ownValue, setOwnValue } from '../src/runtime/json.ts';
import type { JsonPatchOperation } from '../src/webhooks/decision.ts';

/**
 * Applies JSON patches (the subset the admission webhook emits) to a copy of `document`: for tests
 * of what a mutation makes of an object, and that it is idempotent.
 */
export function applyJsonPatch<T>(document: T, patches: readonly JsonPatchOperation[]): T {
  const copy = structuredClone(document) as unknown;
  for (const patch of patches) {
    const tokens = patch.path
      .split('/')
      .slice(1)
      .map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = tokens.pop();
    if (last === undefined) throw new Error('patching the document root is not supported');
    // Tokens are keys of the document (own keys only: `constructor` names no inherited member).
    let parent = copy as Record<string, unknown>;
    for (const token of tokens) parent = ownValue(parent, token) as Record<string, unknown>;
    if (patch.op === 'remove') delete parent[last];
    else setOwnValue(parent, last, structuredClone(patch.value));
  }
  return copy as T;
}
