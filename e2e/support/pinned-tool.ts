import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '../../src/dev/binaries.ts';

const paths = new Map<string, Promise<string>>();

/**
 * The path of a tool the tests pin, from `hack/<tool>/install.sh`, run once per test process and
 * tool (each script returns at once when its tool is cached in `.cache/<tool>/`). The script's
 * progress is passed through to stderr; the path is the last line of its stdout. Rejects when the
 * script fails or prints no path.
 */
export function pinnedToolPath(tool: 'chromium' | 'helm'): Promise<string> {
  let path = paths.get(tool);
  if (path === undefined) {
    path = runInstallScript(tool);
    paths.set(tool, path);
  }
  return path;
}

function runInstallScript(tool: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const child = spawn('bash', [join(repoRoot, 'hack', tool, 'install.sh')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const path = stdout.trim().split('\n').pop();
      if (code === 0 && path) resolve(path);
      else reject(new Error(`hack/${tool}/install.sh gave no ${tool} (exit ${code}): see its message above`));
    });
  });
}
