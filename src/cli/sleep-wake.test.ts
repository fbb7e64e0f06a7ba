import { CommanderError } from 'commander';
import { describe, expect, test } from 'vitest';
import { LAST_ACTIVITY_ANNOTATION, SLEEP_REQUESTED_ANNOTATION } from '../api/labels.ts';
import type { ManagementAnswer, ManagementClient } from './management-client.ts';
import {
  annotationFor,
  parseTimeoutSeconds,
  type SleepWakeRun,
  sleepCommand,
  sleepOrWake,
  wakeCommand,
} from './sleep-wake.ts';

const NOW = Date.parse('2026-01-01T12:00:00.000Z');
const PROJECT_PATH = '/apis/management.platform/v1/projects/web';
const INSTANCE_PATH = '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances/dev';

const condition = (type: string, status: string, reason = 'Any') => ({
  type,
  status,
  reason,
  message: '',
  lastTransitionTime: '2026-01-01T11:00:00Z',
});
const instance = (
  extra: { annotations?: Record<string, string>; status?: unknown; spec?: unknown } = {},
) => ({
  apiVersion: 'management.platform/v1',
  kind: 'VirtualClusterInstance',
  metadata: {
    name: 'dev',
    namespace: 'p-web',
    ...(extra.annotations ? { annotations: extra.annotations } : {}),
  },
  spec: extra.spec ?? { templateRef: { name: 'small' } },
  ...(extra.status ? { status: extra.status } : {}),
});
const asleep = () =>
  instance({
    status: {
      sleepingSince: '2026-01-01T11:00:00Z',
      conditions: [condition('Ready', 'False', 'Sleeping'), condition('Sleeping', 'True', 'Inactive')],
    },
  });
const awake = () =>
  instance({
    status: { conditions: [condition('Ready', 'True', 'Ready'), condition('Sleeping', 'False', 'Awake')] },
  });

/** The management API as the commands see it: answers by method and path, requests recorded. */
function platform(answers: Record<string, ManagementAnswer>, events: unknown[] = []) {
  const sent: { method: string; path: string; patch?: unknown }[] = [];
  const client: ManagementClient = {
    request: async (method, path, patch) => {
      sent.push({ method, path, ...(patch ? { patch } : {}) });
      return answers[`${method} ${path}`] ?? { status: 404, body: { message: 'not found' } };
    },
    watch: async (path, onEvent) => {
      sent.push({ method: 'WATCH', path });
      for (const event of events) if (onEvent(event)) return true;
      return false;
    },
    close: async () => undefined,
  };
  return { client, sent };
}

const found = (body: unknown): ManagementAnswer => ({ status: 200, body });
const project = found({ metadata: { name: 'web' }, status: { namespace: 'p-web' } });

function run(action: 'sleep' | 'wake', extra: Partial<SleepWakeRun> = {}) {
  const said: string[] = [];
  const options: SleepWakeRun = {
    action,
    name: 'dev',
    project: 'web',
    wait: false,
    timeoutSeconds: 30,
    now: () => NOW,
    say: (line) => said.push(line),
    ...extra,
  };
  return { options, said };
}

describe('annotationFor', () => {
  test('sleep writes sleep-requested, wake writes last-activity: the time now, RFC 3339 UTC with milliseconds', () => {
    expect(annotationFor('sleep', awake(), NOW)).toEqual({
      name: SLEEP_REQUESTED_ANNOTATION,
      value: '2026-01-01T12:00:00.000Z',
    });
    expect(annotationFor('wake', asleep(), NOW)).toEqual({
      name: LAST_ACTIVITY_ANNOTATION,
      value: '2026-01-01T12:00:00.000Z',
    });
  });

  test("always later than what it overrides, whatever this machine's clock says", () => {
    const ahead = '2026-01-01T12:30:00.000Z';
    const busy = instance({ annotations: { [LAST_ACTIVITY_ANNOTATION]: ahead } });
    expect(annotationFor('sleep', busy, NOW).value).toBe('2026-01-01T12:30:00.001Z');
    const synced = instance({ status: { lastActivity: ahead } });
    expect(annotationFor('sleep', synced, NOW).value).toBe('2026-01-01T12:30:00.001Z');
    const sleptLater = instance({ status: { sleepingSince: ahead } });
    expect(annotationFor('wake', sleptLater, NOW).value).toBe('2026-01-01T12:30:00.001Z');
    const requested = instance({ annotations: { [SLEEP_REQUESTED_ANNOTATION]: ahead } });
    expect(annotationFor('wake', requested, NOW).value).toBe('2026-01-01T12:30:00.001Z');
  });
});

describe('sleepOrWake through the management API', () => {
  test("sleep: the instance found through its project's namespace, the annotation merge-patched", async () => {
    const { client, sent } = platform({
      [`GET ${PROJECT_PATH}`]: project,
      [`GET ${INSTANCE_PATH}`]: found(awake()),
      [`PATCH ${INSTANCE_PATH}`]: found(awake()),
    });
    const { options, said } = run('sleep');
    await sleepOrWake(client, options);
    expect(sent.at(-1)).toEqual({
      method: 'PATCH',
      path: INSTANCE_PATH,
      patch: {
        contentType: 'application/merge-patch+json',
        body: { metadata: { annotations: { [SLEEP_REQUESTED_ANNOTATION]: '2026-01-01T12:00:00.000Z' } } },
      },
    });
    expect(said).toEqual([
      `virtual cluster "web/dev": sleep requested (${SLEEP_REQUESTED_ANNOTATION}=2026-01-01T12:00:00.000Z)`,
    ]);
  });

  test('wake --wait: follows the instance until it is Ready and not Sleeping', async () => {
    const { client, sent } = platform(
      {
        [`GET ${PROJECT_PATH}`]: project,
        [`GET ${INSTANCE_PATH}`]: found(asleep()),
        [`PATCH ${INSTANCE_PATH}`]: found(asleep()),
      },
      [
        { type: 'ADDED', object: asleep() },
        { type: 'MODIFIED', object: awake() },
      ],
    );
    const { options, said } = run('wake', { wait: true });
    await sleepOrWake(client, options);
    expect(sent.at(-1)).toEqual({
      method: 'WATCH',
      path: '/apis/management.platform/v1/namespaces/p-web/virtualclusterinstances?watch=1&fieldSelector=metadata.name%3Ddev&timeoutSeconds=30',
    });
    expect(said.at(-1)).toBe('virtual cluster "web/dev" is Ready');
  });

  test('wake --wait, not Ready within the bound: an error saying so and the last Ready condition', async () => {
    const { client } = platform(
      {
        [`GET ${PROJECT_PATH}`]: project,
        [`GET ${INSTANCE_PATH}`]: found(asleep()),
        [`PATCH ${INSTANCE_PATH}`]: found(asleep()),
      },
      [{ type: 'ADDED', object: asleep() }],
    );
    await expect(sleepOrWake(client, run('wake', { wait: true }).options)).rejects.toThrow(
      'virtual cluster "web/dev" was not Ready within 30s (Ready=False Sleeping); it may still be waking: run again with a longer --timeout',
    );
  });

  test('wake without --wait does not follow it', async () => {
    const { client, sent } = platform({
      [`GET ${PROJECT_PATH}`]: project,
      [`GET ${INSTANCE_PATH}`]: found(asleep()),
      [`PATCH ${INSTANCE_PATH}`]: found(asleep()),
    });
    await sleepOrWake(client, run('wake').options);
    expect(sent.map((request) => request.method)).toEqual(['GET', 'GET', 'PATCH']);
  });

  test("refusals are said with the platform's message; a refused key asks to sign in again", async () => {
    const refused = platform({
      [`GET ${PROJECT_PATH}`]: project,
      [`GET ${INSTANCE_PATH}`]: found(awake()),
      [`PATCH ${INSTANCE_PATH}`]: { status: 403, body: { message: 'alice cannot patch it' } },
    });
    await expect(sleepOrWake(refused.client, run('sleep').options)).rejects.toThrow(
      `PATCH ${INSTANCE_PATH}: the platform answered 403: alice cannot patch it`,
    );
    const noProject = platform({});
    await expect(sleepOrWake(noProject.client, run('sleep').options)).rejects.toThrow(
      `GET ${PROJECT_PATH}: the platform answered 404: not found`,
    );
    const unknownKey = platform({ [`GET ${PROJECT_PATH}`]: { status: 401, body: {} } });
    await expect(sleepOrWake(unknownKey.client, run('wake').options)).rejects.toThrow(
      'the platform refused the key (401): sign in again',
    );
  });

  test('a key that may not read the Project (a member): the default namespace p-<project>; --namespace names another', async () => {
    const member = platform({
      [`GET ${PROJECT_PATH}`]: { status: 403, body: { message: 'forbidden' } },
      [`GET ${INSTANCE_PATH}`]: found(asleep()),
      [`PATCH ${INSTANCE_PATH}`]: found(asleep()),
    });
    await sleepOrWake(member.client, run('wake').options);
    expect(member.sent.at(-1)).toMatchObject({ method: 'PATCH', path: INSTANCE_PATH });
    const elsewhere = '/apis/management.platform/v1/namespaces/team-web/virtualclusterinstances/dev';
    const named = platform({
      [`GET ${elsewhere}`]: found(asleep()),
      [`PATCH ${elsewhere}`]: found(asleep()),
    });
    await sleepOrWake(named.client, run('wake', { namespace: 'team-web' }).options);
    expect(named.sent.map((request) => `${request.method} ${request.path}`)).toEqual([
      `GET ${elsewhere}`,
      `PATCH ${elsewhere}`,
    ]);
    const missing = platform({ [`GET ${PROJECT_PATH}`]: { status: 403, body: {} } });
    await expect(sleepOrWake(missing.client, run('wake').options)).rejects.toThrow(
      `GET ${INSTANCE_PATH}: the platform answered 404: not found (another namespace of project "web"? use --namespace)`,
    );
  });

  test('a registered instance (spec.endpoint) has no sleep mode: refused before any write', async () => {
    const { client, sent } = platform({
      [`GET ${PROJECT_PATH}`]: project,
      [`GET ${INSTANCE_PATH}`]: found(instance({ spec: { endpoint: 'https://dev.example.com' } })),
    });
    await expect(sleepOrWake(client, run('sleep').options)).rejects.toThrow(
      /is registered \(spec.endpoint\)/,
    );
    expect(sent.some((request) => request.method === 'PATCH')).toBe(false);
  });
});

describe('arguments', () => {
  const parse = (command: ReturnType<typeof sleepCommand>, args: string[]) =>
    command
      .exitOverride()
      .configureOutput({ writeErr: () => undefined, writeOut: () => undefined })
      .action(() => undefined)
      .parseAsync(args, { from: 'user' });

  test('the name and --project are required', async () => {
    await expect(parse(sleepCommand(), ['--project', 'web'])).rejects.toThrow(CommanderError);
    await expect(parse(sleepCommand(), ['dev'])).rejects.toThrow(
      "required option '--project <name>' not specified",
    );
    await expect(parse(wakeCommand(), ['dev', '--project', 'web', '--wait'])).resolves.toBeDefined();
  });

  test('--wait and --timeout are for wake only; --timeout is whole seconds', async () => {
    await expect(parse(sleepCommand(), ['dev', '--project', 'web', '--wait'])).rejects.toThrow(
      "unknown option '--wait'",
    );
    await expect(parse(wakeCommand(), ['dev', '--project', 'web', '--timeout', 'soon'])).rejects.toThrow(
      'not a number of seconds',
    );
    expect(parseTimeoutSeconds('90')).toBe(90);
    expect(() => parseTimeoutSeconds('0')).toThrow('not a number of seconds');
    expect(() => parseTimeoutSeconds('1.5')).toThrow('not a number of seconds');
  });
});
