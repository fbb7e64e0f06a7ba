import type { Command } from 'commander';
import type { Logger } from 'pino';
import { resources, type Stored } from '../api/resources.ts';
import type { VirtualClusterInstance } from '../api/virtualclusterinstance.ts';
import type { VirtualClusterTemplate } from '../api/virtualclustertemplate.ts';
import { InClusterProvisioner } from '../provision/in-cluster.ts';
import { CONTROL_PLANE_BINARY } from '../provision/in-cluster-image.ts';
import { ProcessesProvisioner } from '../provision/processes.ts';
import type { Provisioner } from '../provision/provisioner.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { objectPath } from '../runtime/kube-client.ts';

/**
 * The `--provisioner` flags of `platform controller` and `platform operator`: which provisioner
 * makes the VirtualClusterInstances without `spec.endpoint`, and its settings. `none` (the
 * default) provisions nothing: such instances say `ProvisionerNotConfigured`.
 */

export const PROVISIONER_KINDS = ['none', 'processes', 'in-cluster'] as const;
export type ProvisionerKind = (typeof PROVISIONER_KINDS)[number];

export interface ProvisionerOptions {
  provisioner?: ProvisionerKind;
  /** processes: the platform's state directory (instances under `virtualclusters/`). */
  provisionerStateDir?: string;
  /** processes: the multicall control-plane binary. */
  controlPlaneBinary?: string;
  /** in-cluster: the platform's image, and how to pull it. */
  provisionerImage?: string;
  provisionerImagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  provisionerImagePullSecrets?: string[];
}

function kind(value: string): ProvisionerKind {
  if (!(PROVISIONER_KINDS as readonly string[]).includes(value))
    throw new Error(`--provisioner must be one of ${PROVISIONER_KINDS.join(', ')}`);
  return value as ProvisionerKind;
}

export function withProvisionerOptions(command: Command): Command {
  return command
    .option(
      '--provisioner <kind>',
      `what makes virtual clusters without spec.endpoint (${PROVISIONER_KINDS.join(', ')})`,
      kind,
      'none',
    )
    .option('--provisioner-state-dir <dir>', 'processes: where the virtual control planes keep their state')
    .option('--control-plane-binary <path>', 'processes: the control-plane binary', CONTROL_PLANE_BINARY)
    .option('--provisioner-image <image>', "in-cluster: the platform's image the control planes run")
    .option('--provisioner-image-pull-policy <policy>', 'in-cluster: Always, IfNotPresent or Never')
    .option('--provisioner-image-pull-secrets <names>', 'in-cluster: comma-separated Secret names', (v) =>
      v.split(',').filter(Boolean),
    );
}

/** The template an instance names, read from the host (the in-cluster provisioner reads it on every ensure). */
async function templateOfInstance(api: KubeApi, instance: { namespace: string; name: string }) {
  const read = async <T>(path: string): Promise<T | undefined> =>
    api.request<T>({ method: 'GET', path }).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  const vci = await read<Stored<VirtualClusterInstance>>(
    objectPath(resources.virtualClusterInstances, instance.namespace, instance.name),
  );
  const name = vci?.spec.templateRef?.name;
  if (!name) return undefined;
  return (
    await read<Stored<VirtualClusterTemplate>>(objectPath(resources.virtualClusterTemplates, undefined, name))
  )?.spec;
}

/**
 * The provisioner the options ask for, writing to the host with `api` (unfenced: with shared
 * virtual clusters the replica holding an instance provisions it, leader or not), or undefined
 * for `none`. The processes provisioner's control planes end with the operator (`close`).
 */
export function createProvisioner(
  options: ProvisionerOptions,
  api: KubeApi,
  logger: Logger,
): (Provisioner & { close?: () => Promise<void> }) | undefined {
  switch (options.provisioner ?? 'none') {
    case 'none':
      return undefined;
    case 'processes': {
      if (!options.provisionerStateDir)
        throw new Error('--provisioner processes needs --provisioner-state-dir');
      const log = logger.child({ component: 'provisioner' });
      return new ProcessesProvisioner({
        stateDir: options.provisionerStateDir,
        binary: options.controlPlaneBinary ?? CONTROL_PLANE_BINARY,
        api,
        log: (message) => log.info(message),
      });
    }
    case 'in-cluster': {
      if (!options.provisionerImage) throw new Error('--provisioner in-cluster needs --provisioner-image');
      return new InClusterProvisioner({
        api,
        image: options.provisionerImage,
        ...(options.provisionerImagePullPolicy
          ? { imagePullPolicy: options.provisionerImagePullPolicy }
          : {}),
        ...(options.provisionerImagePullSecrets
          ? { imagePullSecrets: options.provisionerImagePullSecrets }
          : {}),
        templateOf: (instance) => templateOfInstance(api, instance),
      });
    }
  }
}
