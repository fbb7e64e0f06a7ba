import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';

/**
 * docs/spec-coverage.md names, for every requirement, where it is implemented and the tests that
 * back it (`file` > "test name"; "another test name" of the same file). A renamed test or a moved
 * file would leave the table pointing at nothing, so this reads the table and checks that every
 * named file exists and holds every test name given for it, and that each "done" row names a
 * test (or another row).
 */

const PAGE = join(repoRoot, 'docs', 'spec-coverage.md');

interface CoverageRow {
  /** The row's number (first column). */
  readonly row: string;
  readonly status: string;
  /** Backticked repository paths of the "where implemented" column. */
  readonly implemented: readonly string[];
  /** The test column: each named test file with the test names given for it. */
  readonly tests: readonly { readonly file: string; readonly names: readonly string[] }[];
  /** The raw test column. */
  readonly testCell: string;
}

const REPOSITORY_PATH = /^(?:src|e2e|bin|hack|charts|docs)\//;

/** `lifecycle` = `e2e/webhooks/lifecycle.test.ts`, ... from the page's "Abbreviations" paragraph. */
function abbreviations(markdown: string): Map<string, string> {
  const start = markdown.indexOf('Abbreviations:');
  const paragraph = markdown.slice(start, markdown.indexOf('\n\n', start));
  const map = new Map<string, string>();
  for (const match of paragraph.matchAll(/`([\w-]+)`\s*=\s*`([^`]+)`/g)) map.set(match[1]!, match[2]!);
  return map;
}

/**
 * The test column read as a sequence: a backticked test file (or abbreviation) opens a group, a
 * double-quoted string after it is a test name of that file. Text in parentheses describes the
 * test and names none of them (`(row 47)`, `("the claims a sign-in reads")` is a describe
 * block's title and is checked as a name too, as it is a string of the file).
 */
function testReferences(
  cell: string,
  abbreviated: ReadonlyMap<string, string>,
): { file: string; names: string[] }[] {
  const groups: { file: string; names: string[] }[] = [];
  // Backticked spans, or double-quoted strings (a name may hold backticks, as in "`*` runs ...").
  for (const match of cell.matchAll(/"([^"]+)"|`([^`]+)`/g)) {
    const [, quoted, code] = match;
    if (code !== undefined) {
      const file = abbreviated.get(code) ?? code;
      if (REPOSITORY_PATH.test(file) && /\.test\.ts$/.test(file)) groups.push({ file, names: [] });
    } else if (quoted !== undefined) {
      groups.at(-1)?.names.push(quoted);
    }
  }
  return groups;
}

function coverageRows(markdown: string): CoverageRow[] {
  const abbreviated = abbreviations(markdown);
  const rows: CoverageRow[] = [];
  for (const line of markdown.split('\n')) {
    if (!/^\| \d+ \|/.test(line)) continue;
    // Cells split on `|` outside backticks (a cell may quote `a|b`).
    const cells = line
      .slice(1, -1)
      .split(/\|(?=(?:[^`]*`[^`]*`)*[^`]*$)/)
      .map((cell) => cell.trim());
    const [row = '', , status = '', where = '', testCell = ''] = cells;
    rows.push({
      row,
      status,
      implemented: [...where.matchAll(/`([^`]+)`/g)]
        .map((match) => match[1]!)
        .filter((path) => REPOSITORY_PATH.test(path)),
      tests: testReferences(testCell, abbreviated),
      testCell,
    });
  }
  return rows;
}

/**
 * Whether a test file holds a test name. A name as the page writes it may leave out a part with
 * "..." (at its start, end or middle); each part must then appear in the file, in order.
 */
function holdsName(source: string, name: string): boolean {
  const text = source.replace(/\\'/g, "'");
  const parts = name
    .split(/\s*\.\.\.\s*/)
    .map((part) => part.replace(/^[,;\s]+|[,;\s]+$/g, ''))
    .filter((part) => part !== '');
  let from = 0;
  for (const part of parts) {
    const at = text.indexOf(part, from);
    if (at < 0) return false;
    from = at + part.length;
  }
  return parts.length > 0;
}

const markdown = readFileSync(PAGE, 'utf8');
const rows = coverageRows(markdown);

describe('docs/spec-coverage.md', () => {
  test('the table is read: every requirement and every Config field, numbered in order', () => {
    expect(rows.map((row) => Number(row.row))).toEqual(rows.map((_, index) => index + 1));
    expect(rows.length).toBe(147);
  });

  test.each(rows.map((row) => [row.row, row] as const))(
    'row %s: the files it names exist and hold the tests it names',
    (_, row) => {
      for (const path of row.implemented)
        expect(existsSync(join(repoRoot, path)), `implemented in ${path}`).toBe(true);
      for (const { file, names } of row.tests) {
        const path = join(repoRoot, file);
        expect(existsSync(path), `test file ${file}`).toBe(true);
        const source = readFileSync(path, 'utf8');
        for (const name of names) expect(holdsName(source, name), `${file} > "${name}"`).toBe(true);
      }
      if (row.status.startsWith('done'))
        expect(
          row.tests.length > 0 || /\brows? \d+/.test(row.testCell) || row.testCell === 'no behaviour to test',
          `a done row names its test: ${row.testCell}`,
        ).toBe(true);
    },
  );

  /** The status values the page defines (a row's status begins with one). */
  const STATUSES = ['done', 'warned', 'partial', 'deviates', 'missing'];

  test('the Counts section counts the table’s statuses', () => {
    const counts = (from: number, to: number) => {
      const byStatus = new Map<string, number>();
      for (const row of rows.filter((r) => Number(r.row) >= from && Number(r.row) <= to)) {
        const status = /^[a-z]+/.exec(row.status)?.[0] ?? row.status;
        byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
      }
      return { total: to - from + 1, of: (status: string) => byStatus.get(status) ?? 0, byStatus };
    };
    const section = markdown.slice(markdown.indexOf('## Counts'), markdown.indexOf('## Missing'));
    const [requirementsLine = '', configLine = ''] = section
      .split(/\n- /)
      .slice(1)
      .map((line) => line.replace(/\s+/g, ' '));
    const requirements = counts(1, 98);
    for (const status of requirements.byStatus.keys())
      expect(STATUSES, `row status "${status}"`).toContain(status);
    expect(requirementsLine).toContain(`${requirements.total} rows; done ${requirements.of('done')}`);
    expect(requirementsLine).toContain(`partial ${requirements.of('partial')}`);
    expect(requirementsLine).toContain(`deviating ${requirements.of('deviates')}`);
    expect(requirementsLine).toContain(`refused with a warning ${requirements.of('warned')}`);
    expect(requirementsLine).toContain(`missing ${requirements.of('missing')}`);
    const config = counts(99, rows.length);
    for (const status of config.byStatus.keys()) expect(STATUSES, `row status "${status}"`).toContain(status);
    expect(configLine).toContain(`${config.total} rows;`);
    expect(configLine).toContain(`working ${config.of('done')}`);
    expect(configLine).toContain(`partial ${config.of('partial')}`);
    expect(configLine).toContain(`refused with a warning ${config.of('warned')}`);
  });
});

describe('the reading of the table', () => {
  const abbreviated = new Map([['rules', 'e2e/webhooks/rules.test.ts']]);

  test('a file opens a group; names after it are its tests; parentheses name no file', () => {
    expect(
      testReferences(
        '`rules` > "refuses verbs"; "admits verbs" (row 7); `e2e/a/b.test.ts` > "x ... y"; `src/x.ts`',
        abbreviated,
      ),
    ).toEqual([
      { file: 'e2e/webhooks/rules.test.ts', names: ['refuses verbs', 'admits verbs'] },
      { file: 'e2e/a/b.test.ts', names: ['x ... y'] },
    ]);
  });

  test('"..." leaves out a part of the name, in order', () => {
    const source =
      "test('POST a SharedSecret as application/yaml, GET it, PUT it', () => {}); test('it\\'s')";
    expect(holdsName(source, 'POST a SharedSecret as application/yaml, ...')).toBe(true);
    expect(holdsName(source, '... GET it, PUT it')).toBe(true);
    expect(holdsName(source, 'POST a SharedSecret ... PUT it')).toBe(true);
    expect(holdsName(source, 'PUT it ... POST a SharedSecret')).toBe(false);
    expect(holdsName(source, "it's")).toBe(true);
    expect(holdsName(source, 'DELETE it')).toBe(false);
  });
});
