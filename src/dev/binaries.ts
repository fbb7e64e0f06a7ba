import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LineSplitter } from '../runtime/lines.ts';

/** The repository root (this file is src/dev/binaries.ts). */
export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Builds the multicall control-plane binary if its cache entry is missing and returns its path.
 * The build script prints progress on stderr, which we pass through so a user sees a cold
 * build (minutes) is alive; the binary's path is the last line of its stdout.
 */
export function ensureControlPlaneBinary(
  onProgress: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [`${repoRoot}hack/controlplane/build.sh`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const progress = new LineSplitter(onProgress);
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => progress.push(chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      progress.end();
      const path = stdout.trim().split('\n').pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`building the control plane failed (exit ${code}); see the output above`));
    });
  });
}
