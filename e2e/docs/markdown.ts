import { readFileSync } from 'node:fs';

/**
 * The executable examples of the user documentation (`docs/*.md`), read from the Markdown.
 *
 * A fenced code block says what it is in its info string, after the language:
 *
 * | info string                          | meaning                                                                 |
 * |--------------------------------------|-------------------------------------------------------------------------|
 * | `sh test=<id>`                        | a shell example: run by bash in the doc's working directory, in order  |
 * | `text output=<id>` (any language)     | what example `<id>` prints on stdout, compared after it ran            |
 * | `yaml file=<name>` (any language)     | a file the examples use, written as `<name>` before they run           |
 * | `<lang> norun="<reason>"`             | deliberately not executed; the reason is required                      |
 *
 * Optional attributes of a `test` block: `exit=<code>` (expected exit status, default 0),
 * `retry=<seconds>` (run again until it passes or the time is up: for eventually consistent
 * results), `timeout=<seconds>` (default 120).
 *
 * Every fenced block of a doc must carry exactly one of `test`, `output`, `file` or `norun`;
 * {@link lintDoc} reports any that does not, so an example can never be added without either
 * being executed or saying why it is not.
 *
 * In an expected output, `<NAME>` (upper case, digits, `_`) stands for any text within one line
 * (the same text wherever the same name appears), and a line holding only `...` for any number of
 * lines. Trailing spaces and trailing empty lines are ignored.
 */

export interface FencedBlock {
  /** 1-based line of the opening fence. */
  readonly line: number;
  readonly lang: string;
  readonly attrs: Readonly<Record<string, string>>;
  /** The content, ending with a newline unless empty. */
  readonly text: string;
}

export interface TestExample {
  readonly id: string;
  readonly block: FencedBlock;
  readonly output: FencedBlock | undefined;
  readonly exit: number;
  readonly retrySeconds: number;
  readonly timeoutSeconds: number;
}

export interface FileExample {
  readonly name: string;
  readonly block: FencedBlock;
}

export interface Doc {
  /** The path it was read from. */
  readonly path: string;
  readonly blocks: readonly FencedBlock[];
  /** In document order. */
  readonly tests: readonly TestExample[];
  readonly files: readonly FileExample[];
  /** What is wrong with the doc's examples; empty when the doc is well-formed. */
  readonly problems: readonly string[];
}

const FENCE = /^(\s*)(`{3,}|~{3,})(.*)$/;
const ATTRIBUTE = /([A-Za-z][\w-]*)(?:=("(?:[^"\\]|\\.)*"|[^\s"]+))?/g;
export const SHELL_LANGUAGES = ['sh', 'bash', 'shell'];

/** `sh test=a retry=30` -> `{lang: 'sh', attrs: {test: 'a', retry: '30'}}`; a bare word is an attribute with value ''. */
export function parseInfo(info: string): { lang: string; attrs: Record<string, string> } {
  const trimmed = info.trim();
  const space = trimmed.search(/\s/);
  const lang = space < 0 ? trimmed : trimmed.slice(0, space);
  const rest = space < 0 ? '' : trimmed.slice(space);
  const attrs: Record<string, string> = {};
  for (const match of rest.matchAll(ATTRIBUTE)) {
    const [, key = '', raw] = match;
    attrs[key] =
      raw === undefined ? '' : raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw;
  }
  return { lang, attrs };
}

/** The fenced code blocks of a Markdown text (CommonMark fences, also indented in list items). */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] ?? '');
    if (!open) continue;
    const [, indent = '', fence = '', info = ''] = open;
    // A backtick fence's info string may not hold backticks (that is inline code).
    if (fence.startsWith('`') && info.includes('`')) continue;
    const content: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = FENCE.exec(lines[j] ?? '');
      if (close && close[2]?.[0] === fence[0] && (close[2]?.length ?? 0) >= fence.length && !close[3]?.trim())
        break;
      const text = lines[j] ?? '';
      content.push(text.startsWith(indent) ? text.slice(indent.length) : text.trimStart());
    }
    const { lang, attrs } = parseInfo(info);
    blocks.push({ line: i + 1, lang, attrs, text: content.length > 0 ? `${content.join('\n')}\n` : '' });
    i = j;
  }
  return blocks;
}

const ROLES = ['test', 'output', 'file', 'norun'] as const;
const ID = /^[a-z0-9][a-z0-9-]*$/;
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

function positiveNumber(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  return Number.isFinite(number) && number >= 0 ? number : Number.NaN;
}

/** Parses and checks a doc's examples. */
export function parseDoc(path: string, markdown: string): Doc {
  const blocks = fencedBlocks(markdown);
  const problems: string[] = [];
  const at = (block: FencedBlock) => `${path}:${block.line}`;
  const tests: TestExample[] = [];
  const files: FileExample[] = [];
  const outputs = new Map<string, FencedBlock>();
  for (const block of blocks) {
    const roles = ROLES.filter((role) => role in block.attrs);
    if (roles.length !== 1) {
      problems.push(
        roles.length === 0
          ? `${at(block)}: a \`${block.lang || '(no language)'}\` block that is neither executed nor marked: add test=<id>, output=<id>, file=<name> or norun="<why>"`
          : `${at(block)}: a block may be only one of ${roles.join(', ')}`,
      );
      continue;
    }
    const role = roles[0]!;
    const value = block.attrs[role] ?? '';
    if (role === 'norun') {
      if (value.trim().length < 10) problems.push(`${at(block)}: norun needs a reason: norun="<why>"`);
    } else if (role === 'test') {
      if (!ID.test(value)) problems.push(`${at(block)}: test id "${value}" is not [a-z0-9-]+`);
      if (!SHELL_LANGUAGES.includes(block.lang))
        problems.push(
          `${at(block)}: test blocks are shell (${SHELL_LANGUAGES.join(', ')}), not "${block.lang}"`,
        );
      if (tests.some((test) => test.id === value))
        problems.push(`${at(block)}: test id "${value}" is used twice`);
      const exit = positiveNumber(block.attrs.exit, 0);
      const retrySeconds = positiveNumber(block.attrs.retry, 0);
      const timeoutSeconds = positiveNumber(block.attrs.timeout, 120);
      for (const [name, number] of [
        ['exit', exit],
        ['retry', retrySeconds],
        ['timeout', timeoutSeconds],
      ] as const) {
        if (Number.isNaN(number)) problems.push(`${at(block)}: ${name} must be a number`);
      }
      tests.push({ id: value, block, output: undefined, exit, retrySeconds, timeoutSeconds });
    } else if (role === 'output') {
      if (outputs.has(value)) problems.push(`${at(block)}: a second output of "${value}"`);
      outputs.set(value, block);
    } else {
      if (!FILE_NAME.test(value))
        problems.push(`${at(block)}: file name "${value}" is not a plain file name`);
      if (files.some((file) => file.name === value))
        problems.push(`${at(block)}: file "${value}" is defined twice`);
      files.push({ name: value, block });
    }
  }
  for (const [id, block] of outputs) {
    const index = tests.findIndex((test) => test.id === id);
    if (index < 0) {
      problems.push(`${at(block)}: output of "${id}", which is no test of this doc`);
      continue;
    }
    const test = tests[index]!;
    if (block.line < test.block.line) problems.push(`${at(block)}: the output of "${id}" comes before it`);
    tests[index] = { ...test, output: block };
  }
  const scripts = tests.map((test) => test.block.text).join('\n');
  for (const file of files) {
    if (!scripts.includes(file.name))
      problems.push(`${at(file.block)}: file "${file.name}" is used by no test of this doc`);
  }
  return { path, blocks, tests, files, problems };
}

export function readDoc(path: string): Doc {
  return parseDoc(path, readFileSync(path, 'utf8'));
}

// ---------------------------------------------------------------------------------------------
// Expected outputs

const PLACEHOLDER = /<([A-Z][A-Z0-9_]*)>/g;

const normalize = (text: string) =>
  text
    .replace(/\r\n/g, '\n')
    .split('\n')
    .map((line) => line.replace(/\s+$/, ''))
    .join('\n')
    .replace(/\n+$/, '');

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export interface OutputMatch {
  readonly ok: boolean;
  /** The text each placeholder matched. */
  readonly values: Readonly<Record<string, string>>;
}

/** Whether `actual` is what `expected` (with placeholders and `...` lines) describes. */
export function matchOutput(expected: string, actual: string): OutputMatch {
  const seen = new Set<string>();
  // Every line is matched with its newline (the texts get one appended), so that `...` is
  // simply "any number of whole lines".
  const source = normalize(expected)
    .split('\n')
    .map((line) => {
      if (line.trim() === '...') return '(?:[^\\n]*\\n)*?';
      let pattern = '';
      let offset = 0;
      for (const match of line.matchAll(PLACEHOLDER)) {
        const name = match[1]!;
        pattern += escapeRegExp(line.slice(offset, match.index));
        pattern += seen.has(name) ? `\\k<${name}>` : `(?<${name}>[^\\n]+?)`;
        seen.add(name);
        offset = match.index + match[0].length;
      }
      return `${pattern}${escapeRegExp(line.slice(offset))}\\n`;
    })
    .join('');
  const result = new RegExp(`^${source}$`).exec(`${normalize(actual)}\n`);
  return { ok: result !== null, values: { ...(result?.groups ?? {}) } };
}
