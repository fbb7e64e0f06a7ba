import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';
import { fencedBlocks, matchOutput, parseDoc, readDoc } from './markdown.ts';
import { exampleScript } from './runner.ts';

/**
 * The user documentation as files: every fenced block of every page is either executed
 * (`test=`, with its `output=` and `file=` blocks) or says why not (`norun="..."`), every page
 * with examples has the test file that runs them, and the index links every page. So a new
 * example cannot be added without being run, and none can rot unnoticed.
 */

const DOCS = join(repoRoot, 'docs');
const pages = readdirSync(DOCS)
  .filter((file) => file.endsWith('.md'))
  .sort();

describe('docs/*.md', () => {
  test('the pages exist', () => {
    expect(pages).toEqual(
      expect.arrayContaining([
        'README.md',
        'install-helm.md',
        'access-keys-ci.md',
        'sync-patches.md',
        'trust.md',
        'audit.md',
        'metrics.md',
      ]),
    );
  });

  test.each(pages)('%s: every fenced block is executed or marked norun with a reason', (page) => {
    expect(readDoc(join(DOCS, page)).problems).toEqual([]);
  });

  test.each(pages)('%s: its examples are run by its test file in e2e/docs', (page) => {
    const doc = readDoc(join(DOCS, page));
    if (doc.tests.length === 0) return;
    const testFile = join(repoRoot, 'e2e', 'docs', page.replace(/\.md$/, '.test.ts'));
    expect(existsSync(testFile), `${testFile} runs the examples of ${page}`).toBe(true);
    expect(readFileSync(testFile, 'utf8')).toMatch(
      new RegExp(`runDocExamples\\(\\s*'${page.replace('.', '\\.')}'`),
    );
  });

  test.each(pages)('%s: relative links resolve', (page) => {
    const text = readFileSync(join(DOCS, page), 'utf8');
    // Links outside code blocks only.
    const prose = fencedBlocks(text).reduce((rest, block) => rest.replace(block.text, ''), text);
    for (const match of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!.split('#')[0]!;
      if (target === '' || /^[a-z]+:/.test(target)) continue;
      expect(existsSync(resolve(DOCS, target)), `${page} links to ${target}`).toBe(true);
    }
  });

  test('docs/README.md links every page', () => {
    const index = readFileSync(join(DOCS, 'README.md'), 'utf8');
    for (const page of pages.filter((p) => p !== 'README.md')) expect(index).toContain(`](${page})`);
  });
});

describe('the example format (e2e/docs/markdown.ts)', () => {
  const doc = (text: string) => parseDoc('x.md', text);
  const fence = '```';

  test('an unmarked shell or YAML block is a problem; norun needs a reason', () => {
    expect(doc(`${fence}sh\nls\n${fence}\n`).problems).toEqual([
      expect.stringContaining('x.md:1: a `sh` block that is neither executed nor marked'),
    ]);
    expect(doc(`${fence}yaml\na: 1\n${fence}\n`).problems).toHaveLength(1);
    expect(doc(`${fence}\nplain\n${fence}\n`).problems).toHaveLength(1);
    expect(doc(`${fence}sh norun\nls\n${fence}\n`).problems).toEqual([
      expect.stringContaining('needs a reason'),
    ]);
    expect(doc(`${fence}sh norun="needs a browser to log in"\nls\n${fence}\n`).problems).toEqual([]);
    // Indented in a list item, and with tildes.
    expect(doc(`- step\n\n  ~~~sh\n  ls\n  ~~~\n`).problems).toHaveLength(1);
  });

  test('tests, outputs and files belong together', () => {
    const ok = doc(
      `${fence}yaml file=a.yaml\nx: 1\n${fence}\n${fence}sh test=show retry=5 exit=0\ncat a.yaml\n${fence}\n${fence}text output=show\nx: 1\n${fence}\n`,
    );
    expect(ok.problems).toEqual([]);
    expect(ok.tests).toMatchObject([{ id: 'show', retrySeconds: 5, exit: 0, output: { text: 'x: 1\n' } }]);
    expect(doc(`${fence}text output=nothing\nx\n${fence}\n`).problems).toEqual([
      expect.stringContaining('no test of this doc'),
    ]);
    expect(doc(`${fence}yaml file=unused.yaml\nx: 1\n${fence}\n`).problems).toEqual([
      expect.stringContaining('used by no test'),
    ]);
    expect(doc(`${fence}yaml test=wrong\nx: 1\n${fence}\n`).problems).toEqual([
      expect.stringContaining('test blocks are shell'),
    ]);
  });

  test('expected outputs: placeholders and ... lines', () => {
    expect(matchOutput('name: <NAME>\nagain: <NAME>', 'name: ci-x7\nagain: ci-x7\n')).toEqual({
      ok: true,
      values: { NAME: 'ci-x7' },
    });
    expect(matchOutput('name: <NAME>\nagain: <NAME>', 'name: a\nagain: b').ok).toBe(false);
    expect(matchOutput('first\n...\nlast', 'first\nlast').ok).toBe(true);
    expect(matchOutput('first\n...\nlast', 'first\n1\n2\nlast').ok).toBe(true);
    expect(matchOutput('...\nlast', 'last').ok).toBe(true);
    expect(matchOutput('first\n...', 'first\nmore').ok).toBe(true);
    expect(matchOutput('a   \n\n', 'a').ok).toBe(true);
    expect(matchOutput('a', 'a\nb').ok).toBe(false);
  });

  test('examples run as one shell session: variables carry over, the environment can change', () => {
    const dir = mkdtempSync(join(tmpdir(), 'doc-session-'));
    try {
      const state = join(dir, 'state.sh');
      const run = (script: string, env: Record<string, string>) =>
        execFileSync('bash', ['-c', exampleScript(script, state)], {
          cwd: dir,
          env: { PATH: process.env.PATH ?? '', ...env },
          encoding: 'utf8',
        });
      run('KEY=$(printf "a\\nb"); export NAME="two words"; GIVEN=changed-by-example', { GIVEN: 'env' });
      expect(
        run('printf "%s|%s|%s|%s" "$KEY" "$NAME" "$GIVEN" "$LATER"', { GIVEN: 'env', LATER: 'new' }),
      ).toBe('a\nb|two words|changed-by-example|new');
      // A failing example stops at the failure and saves nothing.
      expect(() => run('NEVER=1; false; echo unreachable', {})).toThrow();
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell expansion, not a template
      expect(run('echo "${NEVER:-unset}"', {})).toBe('unset\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the doc examples are tied to the code they describe', () => {
  test('every test of e2e/docs names an existing page', () => {
    for (const file of readdirSync(dirname(new URL(import.meta.url).pathname))) {
      if (!file.endsWith('.test.ts') || file === 'lint.test.ts') continue;
      const page = file.replace(/\.test\.ts$/, '.md');
      expect(pages, `e2e/docs/${file}`).toContain(page);
    }
  });
});
