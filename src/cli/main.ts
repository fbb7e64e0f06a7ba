import { Command, CommanderError } from 'commander';
import { controlPlaneCommand } from './controlplane.ts';
import { crdsCommand } from './crds.ts';
import { devCommand } from './dev.ts';
import { loginCommand, logoutCommand } from './login.ts';
import { operatorCommand } from './operator.ts';
import { syncPreviewCommand } from './sync-preview.ts';
import { syncerCommand } from './syncer.ts';

/**
 * The `platform` command. Each subcommand lives in its own module and registers itself here;
 * later components (operator, syncer, gateway) add theirs the same way.
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
  program.addCommand(syncerCommand());
  program.addCommand(loginCommand());
  program.addCommand(logoutCommand());
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
