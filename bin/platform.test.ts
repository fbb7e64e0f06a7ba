import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, linkSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

/**
 * README.md: `bin/platform.js` runs on the project's runtime, Node 24, and "re-executes itself on
 * it" when started by an older node. The older node is made here, so the test does not depend on
 * the machine's: this node's binary under another path (`older/node`), which a module it imports
 * first makes report Node 20 (`process.versions.node`, what bin/platform.js reads). Every start of
 * a node with that module writes its binary and version to a log. hack/node/install.sh names the
 * runtime; with this node first on PATH it names this node (a Node 24), as on a machine whose own
 * node is 24 (the pinned download is not exercised here).
 */

const platform = fileURLToPath(new URL('./platform.js', import.meta.url));
const runtime = process.execPath;
let scratch: string;
beforeEach(() => {
  scratch = mkdtempSync(join(tmpdir(), 'platform-runtime-'));
});
afterEach(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** A node binary at a path of its own (the kernel reports the path it was started by). */
function olderNode(): string {
  const older = join(scratch, 'older-node');
  try {
    linkSync(runtime, older);
  } catch {
    copyFileSync(runtime, older);
    chmodSync(older, 0o755);
  }
  return older;
}

const PRETEND_OLDER = `
import { appendFileSync } from 'node:fs';
if (process.execPath === process.env.OLDER_NODE) {
  Object.defineProperty(process.versions, 'node', { value: '20.0.0' });
  Object.defineProperty(process, 'version', { value: 'v20.0.0' });
}
appendFileSync(process.env.NODE_STARTS, process.execPath + ' ' + process.versions.node + '\\n');
`;

describe('bin/platform.js started by a node older than 24', () => {
  it('re-executes itself on the Node 24 hack/node/install.sh names, and the command runs there', () => {
    const older = olderNode();
    const preload = join(scratch, 'pretend-older.mjs');
    writeFileSync(preload, PRETEND_OLDER);
    const starts = join(scratch, 'node-starts.log');
    // --no-node-snapshot given: the only reason left to re-execute is the version.
    const run = spawnSync(
      older,
      ['--no-node-snapshot', '--import', pathToFileURL(preload).href, platform, '--help'],
      {
        env: {
          ...process.env,
          PATH: `${dirname(runtime)}:${process.env.PATH}`,
          OLDER_NODE: older,
          NODE_STARTS: starts,
        },
        encoding: 'utf8',
      },
    );
    expect(run.stderr).not.toMatch(/needs Node/);
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^Usage: platform/);
    expect(readFileSync(starts, 'utf8').trim().split('\n')).toEqual([
      `${older} 20.0.0`,
      `${runtime} ${process.versions.node}`,
    ]);
  });
});
