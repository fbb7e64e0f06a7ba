import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import type { GatewayEnv } from '../gateway/support.ts';
import type { DocContext } from './runner.ts';

/**
 * What the doc tests share: the environment a reader of the docs has, made from a test gateway
 * (e2e/gateway/support.ts): `PLATFORM_URL`, a CA bundle that curl (`CURL_CA_BUNDLE`), kubectl and
 * other Go programs (`SSL_CERT_FILE`) and Node.js (`NODE_EXTRA_CA_CERTS`) trust as a reader's
 * machine trusts the gateway's public certificate, and the platform cluster's admin kubeconfig.
 */

/** A temporary directory for the calling test file, removed after it. */
export function useTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `pems` as one bundle into the run's files and returns the variables that trust it. */
export function trustedCas(dir: string, name: string, pems: readonly string[]): Record<string, string> {
  const path = join(dir, name);
  writeFileSync(path, `${pems.map((pem) => pem.trim()).join('\n')}\n`);
  return { CURL_CA_BUNDLE: path, SSL_CERT_FILE: path, NODE_EXTRA_CA_CERTS: path };
}

/** `PLATFORM_URL`, the CA bundle and `KUBECONFIG` (the platform cluster's admin) for a gateway environment. */
export function gatewayVars(env: GatewayEnv, dir: string): Record<string, string> {
  if (!env.caPem) throw new Error('the doc examples need an HTTPS gateway (useGatewayEnv({ https: true }))');
  if (!env.cluster) throw new Error('the doc examples need a gateway environment with a cluster of its own');
  return {
    PLATFORM_URL: env.server.url,
    KUBECONFIG: env.cluster.kubeconfigPath,
    ...trustedCas(dir, 'trusted-cas.pem', [env.caPem]),
  };
}

/** A hook that fails the example unless a shell variable it should have set looks right. */
export function expectShellVar(name: string, pattern: RegExp) {
  return async (_result: unknown, ctx: DocContext) => {
    const value = await ctx.shellVar(name);
    if (value === undefined || !pattern.test(value))
      throw new Error(
        `$${name} should match ${pattern}, it is ${value === undefined ? 'unset' : 'different'}`,
      );
  };
}
