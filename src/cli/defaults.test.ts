import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { controllerCommand } from './controller.ts';
import { gatewayCommand } from './gateway.ts';
import { operatorCommand } from './operator.ts';
import { syncerCommand } from './syncer.ts';

/**
 * The defaults README.md states for each command (its "Commands", "The virtual-cluster syncer"
 * and "The management gateway" sections): the options each command's action receives when it is
 * given no flag. The action is replaced by one that does nothing, so nothing starts; required
 * options (the syncer's) are given, as they have no default to document.
 */
const defaults = (command: Command, requiredFlags: string[] = []) =>
  command
    .action(() => {})
    .exitOverride()
    .parse(requiredFlags, { from: 'user' })
    .opts();

describe('documented command defaults', () => {
  it('operator: gateway on port 8443 over every address, leader election on, health on 8081', () => {
    expect(defaults(operatorCommand())).toMatchObject({
      gatewayPort: 8443,
      gatewayHost: '0.0.0.0',
      gateway: true,
      leaderElect: true,
      healthPort: 8081,
    });
  });

  it('controller: leader election on by default', () => {
    expect(defaults(controllerCommand())).toMatchObject({ leaderElect: true });
  });

  it('gateway alone: the same gateway port as the operator', () => {
    expect(defaults(gatewayCommand())).toMatchObject({ gatewayPort: 8443 });
  });

  it('syncer: /metrics, /healthz and /readyz on port 8082', () => {
    const required = ['--virtual-kubeconfig', 'v', '--host-namespace', 'ns', '--name', 'vc', '--config', 'c'];
    expect(defaults(syncerCommand(), required)).toMatchObject({ healthPort: 8082 });
  });
});
