import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { brotliCompressSync } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type FetchTarball, installPinned } from './install.ts';
import { IntegrityError, sha512Integrity } from './pinned.ts';

/**
 * installPinned on package tarballs laid out as @sparticuz/chromium's (package/bin/*.br), built
 * here with a shell script for the browser, so the checks run without a 67 MiB download; the
 * registry fetch is the one part replaced (the real one is exercised by the login e2e tests).
 */

let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), 'chromium-install-'));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A package tarball whose browser prints `answer` to --version and its environment otherwise. */
function packageTarball(name: string, answer: string): string {
  const root = join(scratch, `build-${name}`);
  const bin = join(root, 'package', 'bin');
  mkdirSync(bin, { recursive: true });
  const browser = `#!/bin/sh\nif [ "$1" = --version ]; then echo '${answer}'; else echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH FONTCONFIG_FILE=$FONTCONFIG_FILE args=$*"; fi\n`;
  writeFileSync(join(bin, 'chromium.br'), brotliCompressSync(browser));
  const archive = (file: string, entries: Record<string, string>) => {
    const content = join(root, `content-${file}`);
    for (const [path, text] of Object.entries(entries)) {
      mkdirSync(join(content, path, '..'), { recursive: true });
      writeFileSync(join(content, path), text);
    }
    const tar = execFileSync('tar', ['-cf', '-', '-C', content, '.']);
    writeFileSync(join(bin, file), brotliCompressSync(tar));
  };
  archive('al2023.tar.br', { 'lib/libnss3.so': 'nss' });
  archive('swiftshader.tar.br', { 'libEGL.so': 'egl' });
  archive('fonts.tar.br', {
    'fonts.conf': '<dir>/tmp/fonts</dir>',
    'fonts/Open_Sans/OpenSans-Regular.ttf': 'font',
  });
  const tarball = join(scratch, `${name}.tgz`);
  execFileSync('tar', ['-czf', tarball, '-C', root, 'package']);
  return tarball;
}

/** The registry, as far as the installer sees it: `npm pack` writing this tarball. */
function registryServing(tarball: string): FetchTarball & { calls: number } {
  const fetch = Object.assign(
    async (_spec: string, directory: string) => {
      fetch.calls++;
      const path = join(directory, 'sparticuz-chromium-1.0.0.tgz');
      copyFileSync(tarball, path);
      return path;
    },
    { calls: 0 },
  );
  return fetch;
}

const pinned = (tarball: string, cacheDir: string, fetchTarball: FetchTarball) => ({
  version: '1.0.0',
  integrity: sha512Integrity(readFileSync(tarball)),
  cacheDir,
  fetchTarball,
  log: () => {},
});

describe('installPinned', () => {
  it('unpacks the browser with a launcher that puts the shipped libraries and fonts first', async () => {
    const tarball = packageTarball('good', 'Chromium 1.0.0.0');
    const cacheDir = join(scratch, 'cache');
    const launcher = await installPinned(pinned(tarball, cacheDir, registryServing(tarball)));

    const outDir = join(cacheDir, '1.0.0');
    expect(launcher).toBe(join(outDir, 'chromium'));
    expect(readFileSync(join(outDir, 'lib', 'libnss3.so'), 'utf8')).toBe('nss');
    expect(readFileSync(join(outDir, 'libEGL.so'), 'utf8')).toBe('egl');
    const fontsConf = readFileSync(join(outDir, 'fonts.conf'), 'utf8');
    expect(fontsConf).toContain(`<dir>${outDir}/fonts</dir>`);
    expect(fontsConf).toContain(`<cachedir>${outDir}/fonts-cache</cachedir>`);
    expect(readFileSync(join(outDir, 'fonts', 'Open_Sans', 'OpenSans-Regular.ttf'), 'utf8')).toBe('font');
    const output = execFileSync(launcher, ['--headless', 'about:blank'], {
      env: { PATH: process.env.PATH, LD_LIBRARY_PATH: '/machine/lib' },
    }).toString();
    expect(output.trim()).toBe(
      `LD_LIBRARY_PATH=${outDir}/lib:/machine/lib FONTCONFIG_FILE=${outDir}/fonts.conf args=--headless about:blank`,
    );
    // Only the browser is left in the cache: no work folder.
    expect(readdirSync(cacheDir)).toEqual(['1.0.0']);
  });

  it('refuses a tarball that is not the pinned one before unpacking anything', async () => {
    const expected = packageTarball('expected', 'Chromium 1.0.0.0');
    const other = packageTarball('other', 'Chromium 6.6.6.6');
    const cacheDir = join(scratch, 'cache');
    const install = installPinned(pinned(expected, cacheDir, registryServing(other)));

    await expect(install).rejects.toThrow(IntegrityError);
    await expect(install).rejects.toThrow(/integrity mismatch: pinned sha512-.*, fetched sha512-/);
    expect(readdirSync(cacheDir)).toEqual([]);

    // Bytes that are no tarball at all: checked first, they never reach tar (whose error this would be).
    const garbage = join(scratch, 'garbage.tgz');
    writeFileSync(garbage, 'not a tarball');
    await expect(installPinned(pinned(expected, cacheDir, registryServing(garbage)))).rejects.toThrow(
      IntegrityError,
    );
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it('refuses a browser that does not answer as Chromium, and caches nothing', async () => {
    const tarball = packageTarball('broken', 'not a browser');
    const cacheDir = join(scratch, 'cache');
    await expect(installPinned(pinned(tarball, cacheDir, registryServing(tarball)))).rejects.toThrow(
      'the unpacked browser answered --version with "not a browser"',
    );
    expect(readdirSync(cacheDir)).toEqual([]);
  });

  it('fetches once: a second run finds the cached browser', async () => {
    const tarball = packageTarball('good', 'Chromium 1.0.0.0');
    const cacheDir = join(scratch, 'cache');
    const registry = registryServing(tarball);
    const first = await installPinned(pinned(tarball, cacheDir, registry));
    const second = await installPinned(pinned(tarball, cacheDir, registry));
    expect(second).toBe(first);
    expect(existsSync(second)).toBe(true);
    expect(registry.calls).toBe(1);
  });
});

describe('install.sh', () => {
  const script = join(import.meta.dirname, 'install.sh');
  /** install.sh with PATH = `bin` and node's folder only, and `env`: status, stdout, stderr. */
  const install = (bin: string, env: Record<string, string> = {}) => {
    const result = spawnSync('bash', [script], {
      env: { PATH: `${bin}:${dirname(process.execPath)}:/usr/bin:/bin`, ...env },
      encoding: 'utf8',
    });
    return { status: result.status, stdout: result.stdout.trim(), stderr: result.stderr };
  };

  it("prints the machine's chromium when PATH has one, fetching nothing", () => {
    const bin = join(scratch, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'chromium'), '#!/bin/sh\n', { mode: 0o755 });
    const result = install(bin);
    expect(result).toMatchObject({ status: 0, stdout: join(bin, 'chromium') });
    expect(result.stderr).not.toContain('fetching');
  });

  it('prints CHROMIUM_PATH when it names an executable, and refuses one that does not', () => {
    const browser = join(scratch, 'my-chrome');
    writeFileSync(browser, '#!/bin/sh\n', { mode: 0o755 });
    expect(install(scratch, { CHROMIUM_PATH: browser })).toMatchObject({ status: 0, stdout: browser });

    const missing = install(scratch, { CHROMIUM_PATH: join(scratch, 'none') });
    expect(missing.status).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toContain(`CHROMIUM_PATH names ${join(scratch, 'none')}, not an executable`);
  });
});
