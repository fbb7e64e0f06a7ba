/**
 * The structure figures issue reviews ask for, measured from the code of `src/` (tests left out):
 * imports that point up a layer, two-file import cycles, files over 400 lines and functions over
 * 80 lines. Layers run bottom to top as README.md's layout says; a folder may import its own layer
 * and any below. Run: `node --import tsx hack/structure/measure.ts [--list]`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const LAYERS: readonly (readonly string[])[] = [
  ['api', 'pki', 'runtime', 'authz'],
  ['config', 'clusters', 'sync', 'provision'],
  ['identity'],
  ['controllers', 'http'],
  ['gateway', 'login', 'webhooks', 'dev'],
  ['cli'],
];
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;

const root = resolve(dirname(new URL(import.meta.url).pathname), '../..');
const src = join(root, 'src');
const list = process.argv.includes('--list');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') && !entry.name.endsWith('.d.ts')
      ? [path]
      : [];
  });
}

const layerOf = (file: string): number => {
  const top = relative(src, file).split('/')[0] ?? '';
  const index = LAYERS.findIndex((layer) => layer.includes(top.replace(/\.ts$/, '')));
  return index === -1 ? LAYERS.length : index;
};

const files = sourceFiles(src);
const imports = new Map<string, Set<string>>();
const upward: string[] = [];
const longFiles: string[] = [];
const longFunctions: string[] = [];

for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const targets = new Set<string>();
  for (const statement of sf.statements) {
    const spec =
      (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) &&
      statement.moduleSpecifier &&
      ts.isStringLiteral(statement.moduleSpecifier)
        ? statement.moduleSpecifier.text
        : undefined;
    if (!spec?.startsWith('.')) continue;
    const target = resolve(dirname(file), spec);
    if (!target.startsWith(src)) continue;
    targets.add(target);
    if (layerOf(target) > layerOf(file)) upward.push(`${relative(root, file)} -> ${relative(root, target)}`);
  }
  imports.set(file, targets);
  const lines = text.split('\n').length;
  if (lines > MAX_FILE_LINES) longFiles.push(`${relative(root, file)} (${lines})`);
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const start = sf.getLineAndCharacterOfPosition(node.getStart()).line;
      const end = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      if (end - start + 1 > MAX_FUNCTION_LINES) {
        const name = node.name?.getText(sf) ?? '(anonymous)';
        longFunctions.push(`${relative(root, file)}:${start + 1} ${name} (${end - start + 1})`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
}

const cycles: string[] = [];
for (const [file, targets] of imports)
  for (const target of targets)
    if (file < target && imports.get(target)?.has(file))
      cycles.push(`${relative(root, file)} <-> ${relative(root, target)}`);

const report = (label: string, items: string[]) => {
  console.log(`${label}: ${items.length}`);
  if (list) for (const item of items) console.log(`  ${item}`);
};
console.log(`source files: ${files.length}`);
report('imports pointing up a layer', upward);
report('two-file import cycles', cycles);
report(`files over ${MAX_FILE_LINES} lines`, longFiles);
report(`functions over ${MAX_FUNCTION_LINES} lines`, longFunctions);
