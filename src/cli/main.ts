import { Command, CommanderError } from 'commander';
import { controllerCommand } from './controller.ts';
import { controlPlaneCommand } from './controlplane.ts';
import { crdsCommand } from './crds.ts';
import { devCommand } from './dev.ts';
import { gatewayCommand } from './gateway.ts';
import { kubeconfigCommand } from './kubeconfig.ts';
import { loginCommand, logoutCommand } from './login.ts';
import { operatorCommand } from './operator.ts';
import { sleepCommand, wakeCommand } from './sleep-wake.ts';
import { syncPreviewCommand } from './sync-preview.ts';
import { syncerCommand } from './syncer.ts';
import { webhookCommand } from './webhook.ts';

/**
 * The `platform` command. Each subcommand lives in its own module and registers itself here.
 * The components run alone (`controller`, `webhook`, `gateway`, `syncer`), each as its own
 * identity, or together in one process (`operator`, `dev`).
 */
export function buildProgram(): Command {
  const program = new Command('platform')
    .description('Cluster management platform: operator, admission webhooks, management gateway and syncer')
    .showHelpAfterError()
    .exitOverride();
  program.addCommand(devCommand());
  program.addCommand(controlPlaneCommand());
  program.addCommand(crdsCommand());
  program.addCommand(operatorCommand());
  program.addCommand(controllerCommand());
  program.addCommand(webhookCommand());
  program.addCommand(gatewayCommand());
  program.addCommand(syncerCommand());
  program.addCommand(loginCommand());
  program.addCommand(logoutCommand());
  program.addCommand(kubeconfigCommand());
  program.addCommand(sleepCommand());
  program.addCommand(wakeCommand());
  program.addCommand(
    new Command('sync').description('Virtual cluster sync tools').addCommand(syncPreviewCommand()),
  );
  return program;
}

try {
  await buildProgram().parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  process.stderr.write(`platform: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
