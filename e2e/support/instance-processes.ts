import { readdirSync, readFileSync } from 'node:fs';

/**
 * Live processes whose command line names `dir` (a provisioned instance's directory), by
 * component, read from /proc: what runs, not what a provisioner recorded. Zombies are skipped.
 */
export function processesNaming(dir: string): { pid: number; component: string }[] {
  const found: { pid: number; component: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.startsWith('Z')) continue;
    } catch {
      continue; // ended meanwhile
    }
    if (!argv.some((a) => a.includes(dir))) continue;
    const component = argv.find((a) => ['etcd', 'kube-apiserver', 'kube-controller-manager'].includes(a));
    found.push({ pid: Number(entry), component: component ?? argv.join(' ') });
  }
  return found;
}
