import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import { renderCrds } from '../api/crd.ts';

export { renderCrds };

/**
 * Writes every generated CRD to `<dir>/<plural>.management.platform.yaml`, removing stale
 * generated files of the group, so the directory matches the schemas exactly.
 */
export async function writeCrds(dir: string): Promise<string[]> {
  const files = renderCrds();
  await mkdir(dir, { recursive: true });
  for (const existing of await readdir(dir)) {
    if (existing.endsWith('.management.platform.yaml') && !files.has(existing)) await rm(join(dir, existing));
  }
  for (const [name, text] of files) await writeFile(join(dir, name), text);
  return [...files.keys()];
}

/** `platform crds [--out dir]`: generate the CustomResourceDefinitions from the API schemas. */
export function crdsCommand(): Command {
  return new Command('crds')
    .description('Write the CustomResourceDefinitions of every stored kind, generated from the API schemas')
    .option('-o, --out <dir>', 'directory to write the CRD files to', 'crds')
    .action(async (options: { out: string }) => {
      for (const name of await writeCrds(options.out)) process.stdout.write(`${join(options.out, name)}\n`);
    });
}
