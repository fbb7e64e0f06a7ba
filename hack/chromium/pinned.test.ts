import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import {
  type ChromiumSituation,
  checkIntegrity,
  chooseChromium,
  findOnPath,
  IntegrityError,
  sha512Integrity,
} from './pinned.ts';

const linuxX64: ChromiumSituation = {
  chromiumPath: undefined,
  forcePinned: false,
  machineChromium: undefined,
  platform: 'linux',
  arch: 'x64',
};

describe('chooseChromium', () => {
  it("takes the machine's chromium when it has one", () => {
    expect(chooseChromium({ ...linuxX64, machineChromium: '/usr/bin/chromium' })).toEqual({
      source: 'machine',
      path: '/usr/bin/chromium',
    });
  });

  it('brings the pinned one where the machine has none', () => {
    expect(chooseChromium(linuxX64)).toEqual({ source: 'pinned' });
  });

  it('brings the pinned one when asked to, though the machine has one', () => {
    expect(chooseChromium({ ...linuxX64, machineChromium: '/usr/bin/chromium', forcePinned: true })).toEqual({
      source: 'pinned',
    });
  });

  it('takes CHROMIUM_PATH over both', () => {
    const situation = {
      ...linuxX64,
      chromiumPath: '/opt/chrome/chrome',
      machineChromium: '/usr/bin/chromium',
    };
    expect(chooseChromium(situation)).toEqual({ source: 'CHROMIUM_PATH', path: '/opt/chrome/chrome' });
    expect(chooseChromium({ ...situation, forcePinned: true })).toEqual({
      source: 'CHROMIUM_PATH',
      path: '/opt/chrome/chrome',
    });
  });

  it("says what to install where the package has no browser for the machine's platform", () => {
    for (const [platform, arch] of [
      ['linux', 'arm64'],
      ['darwin', 'x64'],
    ]) {
      const choice = chooseChromium({ ...linuxX64, platform: platform!, arch: arch! });
      expect(choice.source).toBe('none');
      expect(choice.source === 'none' && choice.reason).toContain(`not ${platform}-${arch}`);
      expect(choice.source === 'none' && choice.reason).toContain('apt-get install -y chromium');
    }
    expect(chooseChromium({ ...linuxX64, arch: 'arm64', machineChromium: '/usr/bin/chromium' })).toEqual({
      source: 'machine',
      path: '/usr/bin/chromium',
    });
  });
});

describe('findOnPath', () => {
  const present = new Set(['/usr/local/bin/chromium-browser', '/usr/bin/chromium', '/snap/bin/chromium']);
  const isExecutable = (path: string) => present.has(path);

  it('finds the first name in the first directory of PATH that has it', () => {
    expect(
      findOnPath(['chromium', 'chromium-browser'], '/usr/local/bin:/usr/bin:/snap/bin', isExecutable),
    ).toBe('/usr/bin/chromium');
    expect(findOnPath(['chromium'], '/snap/bin/:/usr/bin', isExecutable)).toBe('/snap/bin/chromium');
    expect(findOnPath(['chromium-browser', 'chromium'], '/usr/local/bin:/usr/bin', isExecutable)).toBe(
      '/usr/local/bin/chromium-browser',
    );
  });

  it("ignores relative and empty PATH entries (the working directory is not the machine's)", () => {
    expect(
      findOnPath(['chromium'], ':.:bin:/opt/none', (path) => !path.startsWith('/') || present.has(path)),
    ).toBe(undefined);
  });
});

describe('the integrity check', () => {
  const tarball = Buffer.from('a package tarball, byte for byte');
  const pinned = sha512Integrity(tarball);

  it('computes the SRI string the npm registry publishes (the same as openssl)', () => {
    const openssl = execFileSync('openssl', ['dgst', '-sha512', '-binary'], { input: tarball }).toString(
      'base64',
    );
    expect(pinned).toBe(`sha512-${openssl}`);
  });

  it('accepts the pinned bytes', () => {
    expect(() => checkIntegrity(tarball, pinned, 'pkg@1')).not.toThrow();
  });

  it('refuses a tarball with one byte changed, naming both digests', () => {
    const tampered = Buffer.from(tarball);
    tampered[3] = (tampered[3] ?? 0) ^ 1;
    expect(() => checkIntegrity(tampered, pinned, 'pkg@1')).toThrow(IntegrityError);
    expect(() => checkIntegrity(tampered, pinned, 'pkg@1')).toThrow(
      `pkg@1: integrity mismatch: pinned ${pinned}, fetched ${sha512Integrity(tampered)}`,
    );
  });

  it('refuses a pin that is not sha512, rather than checking less', () => {
    const sha1 = 'sha1-+MeDw4F1Fu8S9J3TgXoDcgTNkFA=';
    expect(() => checkIntegrity(tarball, sha1, 'pkg@1')).toThrow('not a sha512 SRI string');
    expect(() => checkIntegrity(tarball, '', 'pkg@1')).toThrow(IntegrityError);
  });
});
