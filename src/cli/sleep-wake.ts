import { Command, InvalidArgumentError } from 'commander';
import { DEFAULT_PROJECT_NAMESPACE_PREFIX } from '../api/config.ts';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../api/labels.ts';
import type { Project } from '../api/project.ts';
import { resources } from '../api/resources.ts';
import type { VirtualClusterInstance } from '../api/virtualclusterinstance.ts';
import { isAwake } from '../gateway/access-proxy/sleep-wake.ts';
import { findCondition } from '../runtime/conditions.ts';
import { objectPath } from '../runtime/kube-client.ts';
import { platformContextOf } from './kubeconfig.ts';
import { kubeconfigPath, readKubeconfig } from './login/login-context.ts';
import { answerError, type ManagementClient, managementClient } from './management-client.ts';

/**
 * `platform sleep <name> --project <p>` and `platform wake <name> --project <p> [--wait]`: put a
 * provisioned virtual cluster to sleep, or wake it, at once (issue 27). Through the management
 * API with the key of a platform context (as `platform kubeconfig`), each writes one annotation
 * of the sleep-mode contract on the VirtualClusterInstance, a merge patch the key's own RBAC
 * allows or refuses: `sleepmode.platform/sleep-requested` (the controller puts the instance to
 * sleep when it is later than its last activity) or `sleepmode.platform/last-activity` (activity
 * later than the time it fell asleep wakes it). `--wait` then follows the instance (a watch)
 * until it is Ready and not Sleeping, at most `--timeout`.
 */

export type SleepOrWake = 'sleep' | 'wake';

/** How long `wake --wait` waits by default: a control plane starts in seconds to tens of seconds. */
export const DEFAULT_WAKE_TIMEOUT_SECONDS = 120;

const later = (time: string | undefined, nowMs: number) => {
  const at = time ? Date.parse(time) : Number.NaN;
  return Number.isFinite(at) && at >= nowMs ? at + 1 : nowMs;
};

/**
 * The annotation `action` writes on `instance` at `nowMs` (RFC 3339 UTC, milliseconds): the
 * request must be later than what it overrides, whatever the clock of this machine says beside
 * the controller's. Sleep: later than the instance's last activity (annotation and status). Wake:
 * later than the time it fell asleep and than a sleep request.
 */
export function annotationFor(
  action: SleepOrWake,
  instance: Pick<VirtualClusterInstance, 'metadata' | 'status'>,
  nowMs: number,
): { readonly name: string; readonly value: string } {
  const annotations = instance.metadata.annotations ?? {};
  const status = instance.status as { lastActivity?: string; sleepingSince?: string } | undefined;
  if (action === 'sleep') {
    const at = Math.max(
      later(annotations[LAST_ACTIVITY_ANNOTATION], nowMs),
      later(status?.lastActivity, nowMs),
    );
    return { name: SLEEP_REQUESTED_ANNOTATION, value: new Date(at).toISOString() };
  }
  const since =
    status?.sleepingSince ?? findCondition(instance.status?.conditions, 'Sleeping')?.lastTransitionTime;
  const at = Math.max(later(since, nowMs), later(annotations[SLEEP_REQUESTED_ANNOTATION], nowMs));
  return { name: LAST_ACTIVITY_ANNOTATION, value: new Date(at).toISOString() };
}

/** The `--timeout` of `wake --wait`: whole seconds, at least 1. */
export function parseTimeoutSeconds(text: string): number {
  const seconds = Number(text);
  if (!/^\d+$/.test(text.trim()) || seconds < 1)
    throw new InvalidArgumentError(`not a number of seconds: ${JSON.stringify(text)} (e.g. 120)`);
  return seconds;
}

export interface SleepWakeRun {
  readonly action: SleepOrWake;
  readonly name: string;
  readonly project: string;
  /** The project's namespace, when the person names it (else read from the Project). */
  readonly namespace?: string | undefined;
  /** Wait until Ready (wake only), at most `timeoutSeconds`. */
  readonly wait: boolean;
  readonly timeoutSeconds: number;
  readonly now: () => number;
  /** Progress and results, for a person. */
  readonly say: (line: string) => void;
}

/**
 * The instance's path: in `namespace` when given, else its project's namespace as the Project's
 * status records it, or, when the key may not read the Project (a member may not: Projects are
 * cluster-scoped), `p-<project>` (the default prefix; another prefix needs `--namespace`).
 */
async function instancePath(
  client: ManagementClient,
  run: Pick<SleepWakeRun, 'project' | 'name' | 'namespace'>,
): Promise<string> {
  const path = (namespace: string) => objectPath(resources.virtualClusterInstances, namespace, run.name);
  if (run.namespace) return path(run.namespace);
  const projectPath = objectPath(resources.projects, undefined, run.project);
  const answer = await client.request('GET', projectPath);
  if (answer.status === 403) return path(`${DEFAULT_PROJECT_NAMESPACE_PREFIX}${run.project}`);
  if (answer.status !== 200) throw new Error(answerError('GET', projectPath, answer));
  const namespace = (answer.body as Project).status?.namespace;
  if (!namespace) throw new Error(`project "${run.project}" has no namespace yet`);
  return path(namespace);
}

/** Writes the annotation of `run.action` on the instance; with `wait`, follows it until it is awake. */
export async function sleepOrWake(client: ManagementClient, run: SleepWakeRun): Promise<void> {
  const path = await instancePath(client, run);
  const read = await client.request('GET', path);
  if (read.status === 404 && !run.namespace)
    throw new Error(
      `${answerError('GET', path, read)} (another namespace of project "${run.project}"? use --namespace)`,
    );
  if (read.status !== 200) throw new Error(answerError('GET', path, read));
  const instance = read.body as VirtualClusterInstance;
  if (instance.spec?.endpoint !== undefined)
    throw new Error(
      `virtual cluster "${run.project}/${run.name}" is registered (spec.endpoint), not provisioned by the platform: it has no sleep mode`,
    );
  const annotation = annotationFor(run.action, instance, run.now());
  const patch = {
    contentType: 'application/merge-patch+json',
    body: { metadata: { annotations: { [annotation.name]: annotation.value } } },
  };
  const written = await client.request('PATCH', path, patch);
  if (written.status !== 200) throw new Error(answerError('PATCH', path, written));
  const what = run.action === 'sleep' ? 'sleep requested' : 'wake requested';
  run.say(`virtual cluster "${run.project}/${run.name}": ${what} (${annotation.name}=${annotation.value})`);
  if (run.action === 'wake' && run.wait) await waitUntilAwake(client, path, run);
}

async function waitUntilAwake(client: ManagementClient, path: string, run: SleepWakeRun): Promise<void> {
  const slash = path.lastIndexOf('/');
  const query = new URLSearchParams({
    watch: '1',
    fieldSelector: `metadata.name=${run.name}`,
    timeoutSeconds: String(run.timeoutSeconds),
  });
  const watchPath = `${path.slice(0, slash)}?${query}`;
  run.say(`waiting until it is Ready (at most ${run.timeoutSeconds}s)...`);
  let last: VirtualClusterInstance | undefined;
  const signal = AbortSignal.timeout(run.timeoutSeconds * 1000);
  const awake = await client.watch(
    watchPath,
    (event) => {
      const object = (event as { type?: string; object?: VirtualClusterInstance }).object;
      if (object?.kind !== 'VirtualClusterInstance') return false;
      last = object;
      return isAwake(object);
    },
    signal,
  );
  if (awake) {
    run.say(`virtual cluster "${run.project}/${run.name}" is Ready`);
    return;
  }
  const ready = findCondition(last?.status?.conditions, 'Ready');
  const state = ready ? ` (Ready=${ready.status}${ready.reason ? ` ${ready.reason}` : ''})` : '';
  throw new Error(
    `virtual cluster "${run.project}/${run.name}" was not Ready within ${run.timeoutSeconds}s${state}; it may still be waking: run again with a longer --timeout`,
  );
}

function command(action: SleepOrWake): Command {
  const description =
    action === 'sleep'
      ? 'Put a provisioned virtual cluster to sleep now (its control plane stopped, its storage kept)'
      : 'Wake a sleeping virtual cluster now';
  const program = new Command(action)
    .description(description)
    .argument('<name>', 'the VirtualClusterInstance')
    .requiredOption('--project <name>', 'its project')
    .option(
      '--namespace <name>',
      "the project's namespace (default: as the Project records it, or p-<project> when the key may not read the Project)",
    )
    .option(
      '--kubeconfig <path>',
      'kubeconfig holding the platform context (default $KUBECONFIG or ~/.kube/config)',
    )
    .option('--context <name>', 'the platform context whose server and key to use (default the current one)');
  if (action === 'wake')
    program
      .option('--wait', 'wait until it is Ready')
      .option(
        '--timeout <seconds>',
        `with --wait: how long to wait (default ${DEFAULT_WAKE_TIMEOUT_SECONDS})`,
        parseTimeoutSeconds,
      );
  return program.action(
    async (
      name: string,
      options: {
        project: string;
        namespace?: string;
        kubeconfig?: string;
        context?: string;
        wait?: boolean;
        timeout?: number;
      },
    ) => {
      const config = readKubeconfig(kubeconfigPath(options.kubeconfig));
      const client = managementClient(config ?? {}, platformContextOf(config, options.context));
      try {
        await sleepOrWake(client, {
          action,
          name,
          project: options.project,
          namespace: options.namespace,
          wait: options.wait === true,
          timeoutSeconds: options.timeout ?? DEFAULT_WAKE_TIMEOUT_SECONDS,
          now: () => Date.now(),
          say: (line) => process.stderr.write(`${line}\n`),
        });
      } finally {
        await client.close();
      }
    },
  );
}

export const sleepCommand = () => command('sleep');
export const wakeCommand = () => command('wake');
