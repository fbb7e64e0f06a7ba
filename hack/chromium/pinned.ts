import { createHash } from 'node:crypto';

/**
 * The pure half of hack/chromium/install.sh: which chromium the tests drive, the integrity check
 * of the pinned package's tarball, and the files written beside the unpacked browser.
 * Run by node's own type stripping (no tsx: the installer runs before or without node_modules),
 * so only erasable TypeScript here. See docs/adr/0018-test-browser-from-the-npm-registry.md.
 */

/** The npm package that ships the pinned Chromium: a headless shell for linux-x64 only. */
export const PINNED_PACKAGE = '@sparticuz/chromium';

/** Names a machine's own chromium goes by on PATH (Debian's package, and Fedora's/Ubuntu's name). */
export const MACHINE_CHROMIUM_NAMES = ['chromium', 'chromium-browser'];

/** What the installer knows about the machine and the caller's wishes. */
export interface ChromiumSituation {
  /** `CHROMIUM_PATH`: a browser the caller names; used as it is. */
  chromiumPath: string | undefined;
  /** `PLATFORM_PINNED_CHROMIUM=1`: the pinned Chromium even where the machine has one. */
  forcePinned: boolean;
  /** The first of MACHINE_CHROMIUM_NAMES found executable on PATH. */
  machineChromium: string | undefined;
  /** `process.platform` and `process.arch`. */
  platform: string;
  arch: string;
}

export type ChromiumChoice =
  | { source: 'CHROMIUM_PATH' | 'machine'; path: string }
  | { source: 'pinned' }
  | { source: 'none'; reason: string };

/**
 * The browser the tests drive: the one `CHROMIUM_PATH` names, else the machine's chromium, else
 * the pinned one, which exists for linux-x64 only.
 */
export function chooseChromium(situation: ChromiumSituation): ChromiumChoice {
  if (situation.chromiumPath) return { source: 'CHROMIUM_PATH', path: situation.chromiumPath };
  if (situation.machineChromium && !situation.forcePinned)
    return { source: 'machine', path: situation.machineChromium };
  if (situation.platform === 'linux' && situation.arch === 'x64') return { source: 'pinned' };
  return {
    source: 'none',
    reason:
      `${PINNED_PACKAGE} ships Chromium for linux-x64 only, not ${situation.platform}-${situation.arch}: ` +
      "install the machine's chromium (Debian: apt-get install -y chromium) or set CHROMIUM_PATH",
  };
}

/** The first `names` entry that `isExecutable` in a directory of `pathVariable` (PATH's syntax). */
export function findOnPath(
  names: readonly string[],
  pathVariable: string,
  isExecutable: (path: string) => boolean,
): string | undefined {
  const directories = pathVariable.split(':').filter((directory) => directory.startsWith('/'));
  for (const name of names)
    for (const directory of directories) {
      const candidate = `${directory.replace(/\/+$/, '')}/${name}`;
      if (isExecutable(candidate)) return candidate;
    }
  return undefined;
}

/** A Subresource Integrity string (`sha512-<base64>`), the form of the npm registry's `dist.integrity`. */
export function sha512Integrity(bytes: Uint8Array): string {
  return `sha512-${createHash('sha512').update(bytes).digest('base64')}`;
}

export class IntegrityError extends Error {
  override readonly name = 'IntegrityError';
}

/**
 * Refuses `bytes` unless their sha512 is the pinned `integrity`. Only sha512 pins are accepted: a
 * weaker or malformed pin is a mistake in the installer, not something to fall back from.
 */
export function checkIntegrity(bytes: Uint8Array, integrity: string, what: string): void {
  if (!/^sha512-[A-Za-z0-9+/]{86}==$/.test(integrity))
    throw new IntegrityError(`${what}: the pinned integrity is not a sha512 SRI string: ${integrity}`);
  const actual = sha512Integrity(bytes);
  if (actual !== integrity)
    throw new IntegrityError(`${what}: integrity mismatch: pinned ${integrity}, fetched ${actual}`);
}

/** The package's compressed files, as its own `executablePath()` inflates them (bin/, brotli). */
export const PACKAGE_FILES = {
  /** The headless shell binary. */
  browser: 'package/bin/chromium.br',
  /** Tarballs unpacked beside it: NSS, NSPR and expat (lib/), SwiftShader, Open Sans and a fonts.conf. */
  archives: ['package/bin/al2023.tar.br', 'package/bin/swiftshader.tar.br', 'package/bin/fonts.tar.br'],
} as const;

/** The unpacked headless shell's name beside its launcher. */
export const HEADLESS_SHELL = 'headless-shell';
/** The launcher's name: the path the installer prints and the tests launch. */
export const LAUNCHER = 'chromium';

/**
 * The launcher: the headless shell with the shared libraries its package ships ahead of the
 * machine's (a Debian machine need not have libnss3), as the package's own code sets
 * LD_LIBRARY_PATH, and the package's fonts only, so pages render alike on every machine.
 */
export function launcherScript(packageVersion: string): string {
  return `#!/bin/sh
# Written by hack/chromium/install.sh: the headless Chromium of ${PINNED_PACKAGE}@${packageVersion}
# with the shared libraries (lib/) and fonts its package ships.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib\${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
FONTCONFIG_FILE="$here/fonts.conf"
export LD_LIBRARY_PATH FONTCONFIG_FILE
exec "$here/${HEADLESS_SHELL}" "$@"
`;
}

/**
 * Replaces the package's fonts.conf (which names Lambda's folders): the fonts unpacked in
 * `directory`, and a font cache of its own there. Absolute paths: fontconfig reads a relative
 * cachedir from the browser's working directory, not from the file's.
 */
export function fontsConf(directory: string): string {
  const xml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  return `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig>
  <dir>${xml(directory)}/fonts</dir>
  <cachedir>${xml(directory)}/fonts-cache</cachedir>
</fontconfig>
`;
}
