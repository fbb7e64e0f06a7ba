import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** `bin/platform.js`: the `platform` command as a person runs it. */
const PLATFORM = join(import.meta.dirname, '..', '..', 'bin', 'platform.js');

export interface PlatformRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `platform <args>` as a child process with only `PATH` and `HOME` (= `home`) of this
 * environment, so that no kubeconfig but the one passed in `args` is read.
 */
export function runPlatform(args: readonly string[], home: string): Promise<PlatformRun> {
  const child = spawn(PLATFORM, [...args], {
    env: { PATH: process.env.PATH ?? '', HOME: home },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr })));
}
