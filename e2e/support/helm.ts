import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, stringify } from 'yaml';
import { repoRoot } from '../../src/dev/binaries.ts';
import type { CommandResult } from './cluster.ts';
import { pinnedToolPath } from './pinned-tool.ts';

/** The chart, as `helm` takes it. */
export const CHART_DIR = join(repoRoot, 'charts', 'platform');

/** Long enough for a cold build of helm from the Go module proxy (minutes), for hooks that may trigger one. */
export const HELM_INSTALL_TIMEOUT_MS = 15 * 60_000;

/**
 * The pinned helm binary: `hack/helm/install.sh` once per test process (it returns at once when
 * the binary is cached in `.cache/helm/`; CI builds it before the tests).
 */
export function helmBinary(): Promise<string> {
  return pinnedToolPath('helm');
}

/** Runs helm; never throws on a non-zero exit (the result says). */
export async function helm(args: string[], stdin = ''): Promise<CommandResult> {
  const path = await helmBinary();
  return new Promise((resolve, reject) => {
    // No user or machine helm configuration, and no cluster: template and lint work offline.
    const home = mkdtempSync(join(tmpdir(), 'helm-home-'));
    const child = spawn(path, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: home,
        HELM_CACHE_HOME: join(home, 'cache'),
        HELM_CONFIG_HOME: join(home, 'config'),
        HELM_DATA_HOME: join(home, 'data'),
      },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      rmSync(home, { recursive: true, force: true });
      resolve({ code: code ?? 1, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are loosely typed
export type Manifest = Record<string, any> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

export interface RenderOptions {
  release?: string;
  namespace?: string;
  /** Written to a values file (`-f`). */
  values?: Record<string, unknown>;
  /** `--include-crds`. */
  includeCrds?: boolean;
}

/** Runs a helm subcommand (`template`, `lint`) on the chart with a values file; the temp file is removed after. */
export async function helmWithValues(
  command: string[],
  values: Record<string, unknown> | undefined,
): Promise<CommandResult> {
  const dir = mkdtempSync(join(tmpdir(), 'helm-values-'));
  try {
    const file = join(dir, 'values.yaml');
    writeFileSync(file, stringify(values ?? {}));
    return await helm([...command, '-f', file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `helm template` of the chart: the manifests as YAML text; throws with helm's message on failure. */
export async function templateChart(options: RenderOptions = {}): Promise<string> {
  const result = await helmWithValues(
    [
      'template',
      options.release ?? 'platform',
      CHART_DIR,
      '--namespace',
      options.namespace ?? 'platform-system',
      ...(options.includeCrds ? ['--include-crds'] : []),
    ],
    options.values,
  );
  if (result.code !== 0) throw new Error(`helm template failed: ${result.stderr}`);
  return result.stdout;
}

/** `helm template` parsed into objects. */
export async function renderChart(options: RenderOptions = {}): Promise<Manifest[]> {
  return parseManifests(await templateChart(options));
}

export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((object): object is Manifest => object !== null && typeof object === 'object');
}

/** One rendered object by kind and name; throws when absent. */
export function find(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.find((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
  if (!found) throw new Error(`the chart rendered no ${kind}${name ? ` ${name}` : ''}`);
  return found;
}
