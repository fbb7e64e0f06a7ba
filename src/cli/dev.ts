import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Command } from 'commander';
import { ensureControlPlaneBinary, repoRoot } from '../dev/binaries.ts';
import { ControlPlane } from '../dev/controlplane.ts';
import { installCrds } from '../dev/install-crds.ts';
import { isAlreadyExists } from '../runtime/errors.ts';
import { defaultOperatorOptions, type RunningOperator, startOperator } from './operator.ts';

export interface DevOptions {
  stateDir: string;
  reset: boolean;
}

const progress = (message: string) => process.stderr.write(`platform dev: ${message}\n`);

/**
 * `platform dev`: the whole platform on a local control plane. Its state lives under
 * `.platform/dev/` so a restart finds everything it had; `--reset` starts from nothing.
 * Each platform component is one step after the control plane is up, so the command grows
 * by adding steps, not by rewriting it.
 */
export function devCommand(): Command {
  return new Command('dev')
    .description(
      'Run the platform locally on an embedded control plane (etcd + kube-apiserver + kube-controller-manager)',
    )
    .option(
      '--state-dir <dir>',
      'where state, certificates and kubeconfigs live',
      join(repoRoot, '.platform', 'dev'),
    )
    .option('--reset', 'discard the state of earlier runs and start from nothing', false)
    .action(async (options: DevOptions) => {
      await runDev(options);
    });
}

export async function runDev({ stateDir, reset }: DevOptions): Promise<void> {
  if (reset) {
    progress(`resetting ${stateDir}`);
    rmSync(stateDir, { recursive: true, force: true });
  }
  mkdirSync(stateDir, { recursive: true });

  const binary = await ensureControlPlaneBinary((line) => progress(line.replace(/^controlplane: /, '')));
  const plane = await ControlPlane.start({
    stateDir: join(stateDir, 'controlplane'),
    binary,
    persist: true,
    log: progress,
  });

  let operator: RunningOperator | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (signal: string) => {
    if (stopping) {
      progress('stopping already; press Ctrl-C again to force');
      process.exit(130);
    }
    progress(`${signal}: stopping`);
    stopping = (operator?.stop() ?? Promise.resolve())
      .then(() => plane.stop())
      .then(() => {
        progress('stopped');
        process.exit(0);
      });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  try {
    const host = await plane.startCluster({ name: 'host', controllerManager: true });
    const hostKubeconfig = join(stateDir, 'host.kubeconfig');
    copyFileSync(host.kubeconfigPath, hostKubeconfig);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(hostKubeconfig);
    progress('installing the CRDs');
    await installCrds(kubeConfig);
    const platformNamespace = 'platform-system';
    await kubeConfig
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: platformNamespace } } })
      .catch((err: unknown) => {
        if (!isAlreadyExists(err)) throw err; // it exists from an earlier run
      });
    progress('starting the operator');
    operator = await startOperator(
      defaultOperatorOptions({
        kubeconfig: hostKubeconfig,
        namespace: platformNamespace,
        healthPort: 0,
        healthHost: '127.0.0.1',
        webhookHost: '127.0.0.1',
        webhookPort: 0,
        webhookEndpoint: 'local',
        gatewayHost: '127.0.0.1',
        gatewayPort: 0,
      }),
    );
    const kubectl = join(dirname(binary), 'kubectl');
    const shown = relative(process.cwd(), hostKubeconfig) || hostKubeconfig;
    process.stdout.write(
      [
        '',
        `The platform is running: Kubernetes at ${host.server}, the operator's metrics at http://127.0.0.1:${operator.manager.healthPort}/metrics, admission webhooks on port ${operator.webhooks?.server.port}, the management gateway at ${operator.gateway?.server.url}/kubernetes/management.`,
        '',
        'Try:',
        `  kubectl --kubeconfig ${shown} get namespaces`,
        `  kubectl --kubeconfig ${shown} get platform -A   (every platform object)`,
        `  (a kubectl of the same version: ${kubectl})`,
        '',
        'Press Ctrl-C to stop; the state stays in ' +
          (relative(process.cwd(), stateDir) || stateDir) +
          ' (use --reset to discard it).',
        '',
      ].join('\n'),
    );
  } catch (err) {
    await plane.stop();
    throw err;
  }
  // Stay up until a signal arrives: the children are unref'd, so hold the event loop open.
  setInterval(() => {}, 1 << 30);
}
