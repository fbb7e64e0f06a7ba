import { Command } from 'commander';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { InClusterProvisioner } from '../provision/in-cluster.ts';
import { CONTROL_PLANE_BINARY } from '../provision/in-cluster-image.ts';
import { ProcessesProvisioner } from '../provision/processes.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { createProvisioner, type ProvisionerOptions, withProvisionerOptions } from './provisioner.ts';

const api: KubeApi = {
  request: () => Promise.reject(new Error('no apiserver in this test')),
  watch: () => Promise.reject(new Error('no apiserver in this test')),
};
const logger = pino({ level: 'silent' });

const parse = (args: string[]): ProvisionerOptions => {
  const command = withProvisionerOptions(new Command('x').exitOverride()).action(() => {});
  command.parse(args, { from: 'user' });
  return command.opts<ProvisionerOptions>();
};

describe('--provisioner', () => {
  it('is none by default: no provisioner, provisioned instances stay ProvisionerNotConfigured', () => {
    expect(parse([]).provisioner).toBe('none');
    expect(createProvisioner(parse([]), api, logger)).toBeUndefined();
  });

  it('processes needs a state directory; the binary defaults to the one in the image', () => {
    expect(() => createProvisioner(parse(['--provisioner', 'processes']), api, logger)).toThrow(
      '--provisioner processes needs --provisioner-state-dir',
    );
    const options = parse(['--provisioner', 'processes', '--provisioner-state-dir', '/tmp/x']);
    expect(options.controlPlaneBinary).toBe(CONTROL_PLANE_BINARY);
    expect(createProvisioner(options, api, logger)).toBeInstanceOf(ProcessesProvisioner);
  });

  it('in-cluster needs the image', () => {
    expect(() => createProvisioner(parse(['--provisioner', 'in-cluster']), api, logger)).toThrow(
      '--provisioner in-cluster needs --provisioner-image',
    );
    const options = parse(['--provisioner', 'in-cluster', '--provisioner-image', 'platform:dev']);
    expect(createProvisioner(options, api, logger)).toBeInstanceOf(InClusterProvisioner);
  });

  it('anything else is refused, naming the choices', () => {
    expect(() => parse(['--provisioner', 'vms'])).toThrow(
      '--provisioner must be one of none, processes, in-cluster',
    );
  });
});
