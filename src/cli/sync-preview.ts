import { readFile } from 'node:fs/promises';
import { Command } from 'commander';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { loadSyncConfig } from '../sync/config.ts';
import { createSandbox, syncToHost, syncToVirtual } from '../sync/sync.ts';
import type { KubeObject, SyncContext } from '../sync/sync-context.ts';

/**
 * `platform sync preview`: prints the object the syncer would write, computed by the syncer's own
 * functions (config validation, translation, patches in the same sandbox).
 */

export interface SyncPreviewOptions {
  config: string;
  vclusterName: string;
  vclusterNamespace: string;
  toVirtual?: boolean;
  host?: string;
  virtual?: string;
  file: string;
}

export class InvalidPreviewInput extends Error {
  override readonly name = 'InvalidPreviewInput';
}

async function readText(file: string, stdin: () => Promise<string>): Promise<string> {
  return file === '-' ? stdin() : readFile(file, 'utf8');
}

async function readObject(file: string, what: string, stdin: () => Promise<string>): Promise<KubeObject> {
  const text = await readText(file, stdin);
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new InvalidPreviewInput(
      `${what} ${file}: not valid YAML: ${err instanceof Error ? err.message : err}`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidPreviewInput(`${what} ${file}: expected one Kubernetes object`);
  }
  return value as KubeObject;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The preview as YAML text; throws on any error (the message names the failing patch). */
export async function runSyncPreview(options: SyncPreviewOptions, stdin = readStdin): Promise<string> {
  const config = loadSyncConfig(await readFile(options.config, 'utf8'));
  const input = await readObject(options.file, 'object', stdin);
  const kind = typeof input.kind === 'string' ? input.kind : '';
  const ctx: SyncContext = {
    vclusterName: options.vclusterName,
    hostNamespace: options.vclusterNamespace,
    config,
  };
  const existingFile = options.toVirtual ? options.virtual : options.host;
  const existing = existingFile ? await readObject(existingFile, 'existing object', stdin) : null;
  const sandbox = createSandbox(ctx);
  try {
    const sync = options.toVirtual ? syncToVirtual : syncToHost;
    const result = sync({
      kind,
      source: input,
      previousSource: null,
      existingTarget: existing,
      ctx,
      sandbox,
    });
    return stringifyYaml(result.object);
  } finally {
    sandbox.dispose();
  }
}

export function syncPreviewCommand(): Command {
  return new Command('preview')
    .description('Print the object the syncer would write for the given object (translation and patches)')
    .requiredOption('--config <file>', 'virtual cluster configuration (YAML)')
    .requiredOption('--vcluster-name <name>', 'name of the virtual cluster')
    .requiredOption('--vcluster-namespace <namespace>', 'host namespace the virtual cluster runs in')
    .option('--to-virtual', 'translate a host object to the virtual object (reverse patches)')
    .option('--host <file>', 'the existing host object (default direction)')
    .option('--virtual <file>', 'the existing virtual object (with --to-virtual)')
    .requiredOption('-f, --file <file>', 'the object to translate, "-" for stdin')
    .action(async (options: SyncPreviewOptions) => {
      try {
        process.stdout.write(await runSyncPreview(options));
      } catch (err) {
        process.stderr.write(`platform sync preview: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exitCode = 1;
      }
    });
}
