import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { repoRoot } from '../../src/dev/binaries.ts';
import { type Doc, matchOutput, readDoc, type TestExample } from './markdown.ts';

/**
 * Runs a doc's examples as its readers would: every `sh test=<id>` block, in document order, by
 * bash in one working directory that holds the doc's `file=` blocks, with the environment the
 * test file provides (`$PLATFORM_URL`, `$PLATFORM_ACCESS_KEY`, `KUBECONFIG`, ...) and the
 * repository's tools first on PATH: the control plane's `kubectl`, `helm` (when asked) and
 * `platform` (`bin/platform.js`). Shell variables an example sets are seen by the examples after
 * it, as in one terminal session. Each example is one vitest test; its exit status and its
 * stdout are checked against the doc (see `markdown.ts`), then the test file's own check runs.
 */

export interface ExampleResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  /** What the expected output's placeholders matched. */
  readonly values: Readonly<Record<string, string>>;
}

export interface DocContext {
  /** The working directory of the examples (the doc's files are here). */
  readonly workdir: string;
  /** The variables the examples see; hooks may add to them. */
  readonly vars: Record<string, string>;
  /** Reads the value of a shell variable the examples have set so far (`undefined` if unset). */
  shellVar(name: string): Promise<string | undefined>;
}

export interface ExampleHooks {
  /** Before the example runs (prepare what the reader would already have). */
  before?: (ctx: DocContext) => Promise<void> | void;
  /** After it passed: more checks, or starting what the example configured. */
  after?: (result: ExampleResult, ctx: DocContext) => Promise<void> | void;
}

export interface DocRunOptions {
  /** The environment of the examples, asked for once before the first example runs. */
  env: () => Record<string, string> | Promise<Record<string, string>>;
  /** Put the pinned helm on PATH. */
  helm?: boolean;
  /** Hooks by test id; every id must be a test of the doc. */
  hooks?: Record<string, ExampleHooks>;
  /** Links created in the working directory: name -> target (e.g. `charts` -> the repository's). */
  links?: Record<string, string>;
}

/** `docs/<name>.md` of the repository. */
export function docPath(name: string): string {
  return join(repoRoot, 'docs', name);
}

/** Declares one vitest test per example of the doc, run in order. */
export function runDocExamples(name: string, options: DocRunOptions): void {
  const doc = readDoc(docPath(name));
  describe(`docs/${name}`, () => {
    let runDir = '';
    let ctx: DocContext | undefined;
    beforeAll(async () => {
      expect(doc.problems, 'the doc lint (e2e/docs/lint.test.ts) explains these').toEqual([]);
      for (const id of Object.keys(options.hooks ?? {})) {
        expect(
          doc.tests.map((t) => t.id),
          `hook for "${id}"`,
        ).toContain(id);
      }
      runDir = mkdtempSync(join(tmpdir(), `platform-doc-${name.replace(/\W/g, '-')}-`));
      ctx = await prepare(doc, runDir, options);
    }, 20 * 60_000);
    afterAll(() => {
      if (runDir) rmSync(runDir, { recursive: true, force: true });
    });

    // The examples build on each other: after a failure the later ones say so instead of failing
    // for reasons of their own.
    let failed: string | undefined;
    for (const example of doc.tests) {
      test(
        `${example.id} (${name}:${example.block.line})`,
        async () => {
          if (!ctx) throw new Error('the doc environment did not start');
          if (failed) throw new Error(`not run: the example "${failed}" before it failed`);
          try {
            const hooks = options.hooks?.[example.id];
            await hooks?.before?.(ctx);
            const result = await runWithRetries(name, example, ctx, runDir);
            await hooks?.after?.(result, ctx);
          } catch (error) {
            failed = example.id;
            throw error;
          }
        },
        (Math.max(example.timeoutSeconds, example.retrySeconds) + 60) * 1000,
      );
    }
  });
}

async function prepare(doc: Doc, runDir: string, options: DocRunOptions): Promise<DocContext> {
  const workdir = join(runDir, 'work');
  const bin = join(runDir, 'bin');
  const home = join(runDir, 'home');
  for (const dir of [workdir, bin, home]) mkdirSync(dir, { recursive: true });
  for (const file of doc.files) writeFileSync(join(workdir, file.name), file.block.text);
  for (const [link, target] of Object.entries(options.links ?? {})) symlinkSync(target, join(workdir, link));
  // `platform` as an installed command would be: the repository's bin/platform.js.
  writeFileSync(
    join(bin, 'platform'),
    `#!/usr/bin/env bash\nexec node --no-node-snapshot ${JSON.stringify(join(repoRoot, 'bin', 'platform.js'))} "$@"\n`,
  );
  chmodSync(join(bin, 'platform'), 0o755);
  const path = [bin, dirname(inject('kubectl'))];
  if (options.helm) {
    const { helmBinary } = await import('../support/helm.ts');
    path.push(dirname(await helmBinary()));
  }
  path.push(process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin');
  const vars: Record<string, string> = {
    PATH: path.join(':'),
    HOME: home,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    ...(process.env.TMPDIR ? { TMPDIR: process.env.TMPDIR } : {}),
    ...(await options.env()),
  };
  // The tools the pages use besides the repository's own.
  const missing = await bash(
    'for tool in bash curl jq base64 node; do command -v "$tool" > /dev/null || echo "$tool"; done',
    workdir,
    vars,
    30,
  );
  if (missing.stdout.trim() !== '')
    throw new Error(
      `the doc examples need these commands on PATH: ${missing.stdout.trim().split('\n').join(', ')}`,
    );
  const state = join(runDir, 'state.sh');
  return {
    workdir,
    vars,
    shellVar: async (variable) => {
      if (!existsSync(state)) return undefined;
      const result = await bash(
        `source ${JSON.stringify(state)}; if [[ -v ${variable} ]]; then printf '%s' "$${variable}"; else exit 3; fi`,
        workdir,
        vars,
        30,
      );
      return result.code === 0 ? result.stdout : undefined;
    },
  };
}

/**
 * The script run for an example: strict mode, the variables of the examples before it, the
 * example itself, then the variables it set saved for the next ones.
 */
export function exampleScript(script: string, state: string): string {
  const quoted = JSON.stringify(state);
  // Saved: what the examples set or changed (compared with the environment the test gives,
  // which later hooks may change), never bash's own variables.
  return `set -euo pipefail
declare -A __doc_base=()
for __doc_name in $(compgen -v); do __doc_base[$__doc_name]=$(declare -p "$__doc_name" 2>/dev/null || true); done
__doc_names=()
if [[ -f ${quoted} ]]; then source ${quoted}; fi
${script}
__doc_save() {
  local __doc_n __doc_decl __doc_flags __doc_saved=()
  local -A __doc_kept=()
  for __doc_n in "\${__doc_names[@]}"; do __doc_kept[$__doc_n]=1; done
  for __doc_n in $(compgen -v); do
    case "$__doc_n" in __doc_*|BASH*|COLUMNS|LINES|FUNCNAME|PIPESTATUS|GROUPS|RANDOM|SECONDS|LINENO|SHLVL|PWD|OLDPWD|EPOCH*|SRANDOM|_) continue ;; esac
    __doc_decl=$(declare -p "$__doc_n" 2>/dev/null) || continue
    __doc_flags=\${__doc_decl#declare -}
    __doc_flags=\${__doc_flags%% *}
    [[ "$__doc_flags" == *r* ]] && continue
    if [[ -n "\${__doc_kept[$__doc_n]:-}" || "\${__doc_base[$__doc_n]:-}" != "$__doc_decl" ]]; then
      printf '%s\\n' "$__doc_decl"
      __doc_saved+=("$__doc_n")
    fi
  done
  printf '__doc_names=(%s)\\n' "\${__doc_saved[*]}"
}
__doc_save > ${quoted}.next
mv ${quoted}.next ${quoted}
`;
}

async function runWithRetries(
  name: string,
  example: TestExample,
  ctx: DocContext,
  runDir: string,
): Promise<ExampleResult> {
  const deadline = Date.now() + example.retrySeconds * 1000;
  const script = exampleScript(example.block.text, join(runDir, 'state.sh'));
  for (let attempt = 1; ; attempt++) {
    const run = await bash(script, ctx.workdir, ctx.vars, example.timeoutSeconds);
    // For whoever updates a doc: DOCS_OUTPUT_DIR=<dir> keeps what each example printed.
    const keep = process.env.DOCS_OUTPUT_DIR;
    if (keep)
      writeFileSync(
        join(keep, `${name}.${example.id}.out`),
        `${run.stdout}--- exit ${run.code}\n${run.stderr}`,
      );
    const failure = judge(example, run);
    if (!failure) return { ...run, values: matchOutput(example.output?.text ?? '', run.stdout).values };
    if (Date.now() >= deadline) {
      throw new Error(
        `${failure} (attempt ${attempt})\n--- script\n${example.block.text}--- stdout\n${run.stdout}--- stderr\n${run.stderr}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

function judge(example: TestExample, run: { code: number; stdout: string }): string | undefined {
  if (run.code !== example.exit) return `exit status ${run.code}, the doc expects ${example.exit}`;
  if (example.output && !matchOutput(example.output.text, run.stdout).ok) {
    return `the output differs from the doc's (line ${example.output.line}):\n--- expected\n${example.output.text}`;
  }
  return undefined;
}

/** Runs a bash script in its own process group, killed (the group) after `timeoutSeconds`. */
function bash(
  script: string,
  cwd: string,
  env: Record<string, string>,
  timeoutSeconds: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${timeoutSeconds}s)\n`;
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }, timeoutSeconds * 1000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}
