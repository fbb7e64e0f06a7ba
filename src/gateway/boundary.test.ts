import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';

/**
 * The gateway is a leaf: domain code (keys, scopes, identity groups and extras, `Status`) lives
 * where controllers, webhooks, login and the gateway all depend on it, and only the composition
 * roots (`src/cli`) put the gateway together. An import of `src/gateway` from anywhere else in
 * `src/` fails here (static imports, `export ... from`, and dynamic `import()` alike).
 */

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const GATEWAY = join(SRC, 'gateway');
const ALLOWED = [GATEWAY, join(SRC, 'cli')];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|mts|js|mjs)$/.test(entry.name) ? [path] : [];
  });
}

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g;

/** The relative module specifiers of a source text that resolve into `src/gateway`. */
function gatewayImports(file: string, text: string): string[] {
  return [...text.matchAll(SPECIFIER)]
    .map((match) => match[1] as string)
    .filter((specifier) => specifier.startsWith('.'))
    .filter((specifier) => {
      const target = resolve(dirname(file), specifier);
      return target === GATEWAY || target.startsWith(`${GATEWAY}${sep}`);
    });
}

describe('the gateway boundary', () => {
  test('the check sees every form of import', () => {
    const file = join(SRC, 'login', 'x.ts');
    const text = [
      "import { a } from '../gateway/proxy/impersonation.ts';",
      "import type { B } from '../gateway/index.ts';",
      "export { c } from '../gateway/pipeline/body.ts';",
      "const d = await import('../gateway/server.ts');",
      "import '../gateway/metrics.ts';",
      "import { e } from '../identity/groups.ts';",
      "import { f } from 'node:http';",
    ].join('\n');
    expect(gatewayImports(file, text)).toEqual([
      '../gateway/proxy/impersonation.ts',
      '../gateway/index.ts',
      '../gateway/pipeline/body.ts',
      '../gateway/server.ts',
      '../gateway/metrics.ts',
    ]);
  });

  test('nothing in src/ outside src/gateway and src/cli imports from src/gateway', () => {
    const offenders = sources(SRC)
      .filter((file) => !ALLOWED.some((dir) => file.startsWith(`${dir}${sep}`)))
      .flatMap((file) =>
        gatewayImports(file, readFileSync(file, 'utf8')).map(
          (specifier) => `${relative(SRC, file)} imports ${specifier}`,
        ),
      );
    expect(offenders).toEqual([]);
  });
});
