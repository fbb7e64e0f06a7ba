import { execFile, execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { repoRoot } from '../../src/dev/binaries.ts';
import { fencedBlocks } from '../docs/markdown.ts';

/**
 * What the GitOps tools' own code says about objects: the `hack/health` checker (kstatus from
 * sigs.k8s.io/cli-utils, and Argo CD Lua health scripts run by gopher-lua as Argo CD runs them),
 * built from the Go module proxy and cached like the control plane.
 */

export interface Verdict {
  status: string;
  message: string;
}

export interface Health {
  kind: string;
  name: string;
  namespace?: string;
  kstatus: Verdict;
  /** null when no script is documented for the kind. */
  argocd: Verdict | null;
}

let binary: Promise<string> | undefined;

/** The checker's path, built once (minutes cold, cached in .cache/health/). */
export function healthBinary(): Promise<string> {
  binary ??= promisify(execFile)('bash', [join(repoRoot, 'hack/health/build.sh')], {
    maxBuffer: 16 * 1024 * 1024,
  }).then(({ stdout }) => stdout.trim().split('\n').pop()!);
  return binary;
}

/** Runs the checker over `objects` with Argo CD `scripts` by `<group>/<Kind>`. */
export async function healthOf(
  objects: KubernetesObject[],
  scripts: Record<string, string>,
): Promise<Health[]> {
  const output = execFileSync(await healthBinary(), [], {
    input: JSON.stringify({ scripts, objects }),
    maxBuffer: 16 * 1024 * 1024,
  });
  return JSON.parse(output.toString()) as Health[];
}

const HEALTH_KEY = /^resource\.customizations\.health\.(.+)_([A-Za-z0-9]+)$/;

/** `<group>/<Kind>` -> Lua, from an argocd-cm `data` document (YAML, anchors resolved). */
function scriptsOf(yamlText: string): Record<string, string> {
  const data = (parse(yamlText) as { data?: Record<string, string> }).data ?? {};
  const scripts: Record<string, string> = {};
  for (const [key, script] of Object.entries(data)) {
    const match = HEALTH_KEY.exec(key);
    if (match) scripts[`${match[1]}/${match[2]}`] = script;
  }
  return scripts;
}

/** The Argo CD health checks as docs/gitops-health.md gives them (its `argocd-health.yaml`). */
export function documentedScripts(): Record<string, string> {
  const block = fencedBlocks(readFileSync(join(repoRoot, 'docs/gitops-health.md'), 'utf8')).find(
    (b) => b.attrs.file === 'argocd-health.yaml',
  );
  if (!block) throw new Error('docs/gitops-health.md has no argocd-health.yaml block');
  return scriptsOf(block.text);
}

/** The Argo CD health checks as the chart's README gives them (its "Health in GitOps tools" section). */
export function chartReadmeScripts(): Record<string, string> {
  const text = readFileSync(join(repoRoot, 'charts/platform/README.md'), 'utf8');
  const section = text.slice(text.indexOf('## Health in GitOps tools'));
  const block = fencedBlocks(section).find((b) => b.lang === 'yaml');
  if (!block) throw new Error('charts/platform/README.md has no YAML block under "Health in GitOps tools"');
  return scriptsOf(block.text);
}
