import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';

/**
 * README.md's Layout block names folders and files; each must exist, so the map of the tree
 * cannot drift from it unnoticed. An entry is a line starting in the first column: its first
 * word is a path from the repository root (`<kind>` stands for any folder); every `name.ts`,
 * `name.js` and `folder/` its description names must exist under that path or, failing that,
 * from the repository root.
 */

interface LayoutEntry {
  path: string;
  description: string;
}

function layoutEntries(readme: string): LayoutEntry[] {
  const section = readme.split(/^## Layout$/m)[1]?.split(/^```$/m)[1];
  if (section === undefined) throw new Error('README.md has no Layout block');
  const entries: LayoutEntry[] = [];
  for (const line of section.split('\n')) {
    if (line.trim() === '') continue;
    if (/^\S/.test(line)) {
      const [path, ...rest] = line.split(/\s+/);
      entries.push({ path: path!, description: rest.join(' ') });
    } else {
      const last = entries.at(-1);
      if (last === undefined) throw new Error(`a continuation line before any entry: ${line}`);
      last.description += ` ${line.trim()}`;
    }
  }
  return entries;
}

/** Slash-separated words of the prose that are no paths. */
const PROSE_NOT_PATHS = new Set(['create/update/']);

/** The names a description mentions as files (`x.ts`, `x.js`) or folders (`x/`, `x/y/`). */
function namedPaths(description: string): string[] {
  const names = new Set<string>();
  for (const match of description.matchAll(
    /(?<![\w./<>-])([\w-]+(?:\/[\w-]+)*\.(?:ts|js)|[\w-]+\/(?:[\w-]+\/)*)(?![\w])/g,
  )) {
    if (!PROSE_NOT_PATHS.has(match[1]!)) names.add(match[1]!);
  }
  return [...names];
}

function allPaths(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string, prefix: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const relative = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
      if (entry.isDirectory()) {
        found.push(`${relative}/`);
        walk(join(dir, entry.name), relative);
      } else {
        found.push(relative);
      }
    }
  };
  walk(root, '');
  return found;
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** The folder an entry's path stands for: `<kind>` and what follows it is cut off. */
function entryFolder(path: string): string {
  return path.split('<')[0]!;
}

const entries = layoutEntries(readFileSync(join(repoRoot, 'README.md'), 'utf8'));

describe("README.md's Layout and the paths it names", () => {
  test('it lists the top-level folders and files it describes', () => {
    expect(entries.map((entry) => entry.path)).toEqual(
      expect.arrayContaining(['bin/platform.js', 'src/cli/', 'e2e/', 'bench/', 'docs/adr/']),
    );
  });

  test.each(entries.map((entry) => [entry.path, entry] as const))(
    '%s exists, and every file and folder its description names',
    (_path, entry) => {
      expect(exists(join(repoRoot, entry.path.replace(/<kind>\/$/, ''))), entry.path).toBe(true);
      const folder = entryFolder(entry.path);
      const under = statSync(join(repoRoot, folder)).isDirectory() ? allPaths(join(repoRoot, folder)) : [];
      const missing = namedPaths(entry.description).filter(
        (name) =>
          !under.some((path) => path === name || path.endsWith(`/${name}`)) && !exists(join(repoRoot, name)),
      );
      expect(missing, `${entry.path} names what is not in the tree`).toEqual([]);
    },
  );

  test('src/controllers/<kind>/: every kind it lists has reconcile.ts, setup.ts and, but for the two it names, desired.ts', () => {
    const entry = entries.find((candidate) => candidate.path === 'src/controllers/<kind>/');
    expect(entry).toBeDefined();
    // "...: sharedsecret, secretsync, accesskey, project (...), ...; common.ts: what they share"
    const kindList = entry!.description
      .replace(/\([^)]*\)/g, '')
      .split(';')[0]!
      .split(':')
      .at(-1)!;
    const kinds = kindList.split(',').map((part) => part.trim());
    expect(kinds).toEqual(expect.arrayContaining(['sharedsecret', 'accesskey', 'identityrefresh']));
    const withoutDesired = ['accesskey', 'teammembership'];
    expect(entry!.description).toContain(`desired.ts (pure; ${withoutDesired.join(' and ')} keep`);
    for (const kind of kinds) {
      const files = readdirSync(join(repoRoot, 'src/controllers', kind));
      expect(files, kind).toEqual(expect.arrayContaining(['reconcile.ts', 'setup.ts']));
      expect(files.includes('desired.ts'), `${kind}/desired.ts`).toBe(!withoutDesired.includes(kind));
    }
  });

  test('every path of the repository README.md names in backticks exists (`<placeholder>` parts stand for any name)', () => {
    const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
    const paths = [
      ...readme.matchAll(/`((?:src|e2e|charts|hack|bench|docs|bin|test-support|crds)\/[^`\s]*)`/g),
    ].map((match) => match[1]!);
    expect(paths.length).toBeGreaterThan(10);
    const missing = paths
      .filter((path) => !path.includes('<'))
      .filter((path) => !exists(join(repoRoot, path)));
    expect(missing).toEqual([]);
  });

  test('a name that is not in the tree is found missing', () => {
    const description = 'desired.ts (pure), no-such-module.ts, rules/, no-such-folder/';
    expect(namedPaths(description)).toEqual(['desired.ts', 'no-such-module.ts', 'rules/', 'no-such-folder/']);
    const under = allPaths(join(repoRoot, 'src/webhooks'));
    expect(under).toContain('rules/');
    expect(under.some((path) => path.endsWith('/no-such-module.ts') || path === 'no-such-module.ts')).toBe(
      false,
    );
  });
});
