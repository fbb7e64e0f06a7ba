#!/usr/bin/env -S node --no-node-snapshot
// The `platform` command. isolated-vm needs `--no-node-snapshot`; the shebang passes it, and
// when we are started some other way (`node bin/platform.js`) we re-exec ourselves with it.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';

if (!process.execArgv.includes('--no-node-snapshot')) {
  const child = spawn(
    process.execPath,
    ['--no-node-snapshot', ...process.execArgv, ...process.argv.slice(1)],
    {
      stdio: 'inherit',
    },
  );
  // Ctrl-C reaches the child from the terminal (same process group): forwarding SIGINT would
  // deliver it twice, which the child reads as "force". Other signals are aimed at us alone.
  process.on('SIGINT', () => {});
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
} else {
  // A checkout runs its sources (through tsx, a dev dependency), so nothing is ever stale;
  // an installed image has only the compiled dist/.
  const source = fileURLToPath(new URL('../src/cli/main.ts', import.meta.url));
  const compiled = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
  if (existsSync(source) && existsSync(fileURLToPath(new URL('../node_modules/tsx', import.meta.url)))) {
    const { register } = await import('tsx/esm/api');
    register();
    await import(pathToFileURL(source).href);
  } else {
    await import(pathToFileURL(compiled).href);
  }
}
