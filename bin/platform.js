#!/usr/bin/env -S node --no-node-snapshot
// The `platform` command. isolated-vm needs `--no-node-snapshot`; the shebang passes it, and
// when we are started some other way (`node bin/platform.js`) we re-exec ourselves with it.
// The runtime is Node 24: started by an older node in a checkout, we re-exec on the project's
// pinned Node 24 (hack/node/install.sh, cached in .cache/node/). This file must stay plain
// JavaScript that an old node can parse.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REQUIRED_NODE_MAJOR = 24;

/** The node to run on: this one when it is new enough, else the checkout's pinned Node 24. */
function runtime() {
  if (Number(process.versions.node.split('.')[0]) >= REQUIRED_NODE_MAJOR) return process.execPath;
  const installer = fileURLToPath(new URL('../hack/node/install.sh', import.meta.url));
  if (!existsSync(installer)) {
    process.stderr.write(`platform: needs Node ${REQUIRED_NODE_MAJOR}, this is ${process.version}\n`);
    process.exit(1);
  }
  const binDir = execFileSync('bash', [installer], { stdio: ['ignore', 'pipe', 'inherit'] })
    .toString()
    .trim()
    .split('\n')
    .pop();
  return join(binDir, 'node');
}

const node = runtime();
if (node !== process.execPath || !process.execArgv.includes('--no-node-snapshot')) {
  const flags = process.execArgv.includes('--no-node-snapshot') ? [] : ['--no-node-snapshot'];
  const child = spawn(node, [...flags, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
  });
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
