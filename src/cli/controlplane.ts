import { Command } from 'commander';
import { ensureControlPlaneBinary } from '../dev/binaries.ts';

/** `platform controlplane build`: builds (or finds cached) the local control-plane binary. */
export function controlPlaneCommand(): Command {
  const command = new Command('controlplane').description('Manage the local Kubernetes control plane build');
  command
    .command('build')
    .description(
      'Build etcd, kube-apiserver, kube-controller-manager and kubectl from the Kubernetes Go modules (cached)',
    )
    .action(async () => {
      process.stdout.write(`${await ensureControlPlaneBinary()}\n`);
    });
  return command;
}
