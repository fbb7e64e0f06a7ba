import { describe, expect, it } from 'vitest';
import type { ClusterAccess } from '../../clusters/access.ts';
import { TerminalError } from '../../runtime/errors.ts';
import { PROGRESSING_WITH_RETRY } from '../../runtime/reconcile-conditions.ts';
import { validateSyncConfig } from '../../sync/config.ts';
import type { SyncerStatus } from '../../sync/controllers/syncer.ts';
import type { PlacementProblem } from '../../sync/placement.ts';
import {
  asksToBeSynced,
  CredentialsMissing,
  InvalidConfig,
  instanceOutcome,
  PlacementNotAllowed,
  type SyncerState,
  stalledOutcome,
  stallOf,
  syncerFingerprint,
  syncingCondition,
} from './desired.ts';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const vci = (spec: Record<string, unknown> = {}) => ({
  metadata: { name: 'dev', namespace: 'p-team' },
  spec: { endpoint: 'https://vc.example:6443', caData: b64('PEM'), ...spec },
});

describe('syncerFingerprint', () => {
  it('changes with any input and does not contain the token', () => {
    const base = {
      connection: { server: 's', token: 'very-secret' },
      config: 'a: 1',
      hostNamespace: 'n',
      vclusterName: 'v',
    };
    const fp = syncerFingerprint(base);
    expect(fp).not.toContain('very-secret');
    expect(syncerFingerprint({ ...base })).toBe(fp);
    expect(syncerFingerprint({ ...base, connection: { server: 's', token: 'rotated' } })).not.toBe(fp);
    expect(syncerFingerprint({ ...base, config: 'a: 2' })).not.toBe(fp);
  });
});

describe('syncingCondition', () => {
  const status = (over: Partial<SyncerStatus> = {}): SyncerStatus => ({
    ready: true,
    stopped: false,
    kinds: ['Service', 'Endpoints'],
    waitingFor: [],
    failing: [],
    ...over,
  });

  it('maps every state to one condition', () => {
    expect(syncingCondition({ phase: 'notConfigured' }, 1)).toBeNull();
    expect(syncingCondition({ phase: 'invalidConfig', errors: ['a: b'] }, 2)).toEqual({
      type: 'Syncing',
      status: 'False',
      reason: 'InvalidConfig',
      message: 'spec.config: a: b',
      observedGeneration: 2,
    });
    expect(
      syncingCondition({ phase: 'noConnection', reason: 'Unreachable', message: 'down' }, 1),
    ).toMatchObject({ status: 'False', reason: 'Unreachable' });
    expect(
      syncingCondition(
        { phase: 'running', status: status({ ready: false, waitingFor: ['virtual services'] }) },
        1,
      ),
    ).toMatchObject({
      status: 'Unknown',
      reason: 'Starting',
      message: 'waiting for the caches: virtual services',
    });
    expect(syncingCondition({ phase: 'running', status: status() }, 1)).toMatchObject({
      status: 'True',
      reason: 'Synced',
      message: 'syncing Service, Endpoints',
    });
  });

  it('lists a few failing objects, clipped', () => {
    const failing = Array.from({ length: 7 }, (_, i) => ({
      kind: 'Endpoints' as const,
      key: `default/e${i}`,
      reason: 'ExpressionTimeout',
      message: `sync.toHost.endpoints.patches[0].expression: took longer than 50ms ${'x'.repeat(i === 0 ? 400 : 0)}`,
    }));
    const condition = syncingCondition({ phase: 'running', status: status({ failing }) }, 3)!;
    expect(condition).toMatchObject({ status: 'False', reason: 'SyncError', observedGeneration: 3 });
    expect(condition.message).toMatch(/^7 object\(s\) failed to sync: Endpoints default\/e0: /);
    expect(condition.message).toContain('(and 2 more)');
    expect(condition.message).not.toContain('e5');
    expect(condition.message.length).toBeLessThan(2000);
  });
});

describe('asksToBeSynced', () => {
  it('credentials and a configuration, whether or not the syncer may run', () => {
    expect(asksToBeSynced(vci())).toBe(false);
    expect(asksToBeSynced(vci({ credentialsSecretRef: { name: 'c' } }) as never)).toBe(false);
    expect(asksToBeSynced(vci({ config: 'sync: {}' }) as never)).toBe(false);
    expect(asksToBeSynced(vci({ credentialsSecretRef: { name: 'c' }, config: 'not: valid' }) as never)).toBe(
      true,
    );
  });
});

describe('instanceOutcome', () => {
  const reachable: ClusterAccess = {
    phase: 'probed',
    reachability: { reachable: true, username: 'vc-admin' },
  };
  const refused: ClusterAccess = {
    phase: 'probed',
    reachability: { reachable: false, reason: 'Unauthorized', message: 'the credentials were refused' },
  };
  const secretMissing: ClusterAccess = {
    phase: 'noCredentials',
    reason: 'CredentialsMissing',
    message: 'Secret vc-creds does not exist',
  };
  const running: SyncerState = {
    phase: 'running',
    status: { ready: true, stopped: false, kinds: ['Service'], waitingFor: [], failing: [] },
  };

  it('reachable, not synced: Ready=True, Syncing removed, nothing outstanding', () => {
    expect(instanceOutcome(reachable, { phase: 'notConfigured' }, 60_000)).toEqual({
      ready: {
        status: 'True',
        reason: 'Reachable',
        message: "the platform reaches the virtual cluster's API as vc-admin",
      },
      removeConditions: ['Syncing'],
      requeueAfter: 60_000,
    });
  });

  it('syncing: Ready=True and Syncing=True', () => {
    const outcome = instanceOutcome(reachable, running, 60_000);
    expect(outcome.ready).toMatchObject({ status: 'True', reason: 'Reachable' });
    expect(outcome.conditions).toEqual([
      { type: 'Syncing', status: 'True', reason: 'Synced', message: 'syncing Service' },
    ]);
    expect(outcome.reconciling).toBeUndefined();
  });

  it('the syncer starting: Ready=Unknown and Reconciling=True with its reason (progressing)', () => {
    const outcome = instanceOutcome(
      reachable,
      { phase: 'starting', message: 'waiting for permissions' },
      500,
    );
    expect(outcome.ready).toMatchObject({ status: 'Unknown', reason: 'Starting' });
    expect(outcome.reconciling).toEqual({
      reason: 'Starting',
      message: 'reachable, but not syncing: waiting for permissions',
    });
  });

  it('not reachable, looked at again: Ready=False and Reconciling=True (ProgressingWithRetry)', () => {
    const outcome = instanceOutcome(
      refused,
      { phase: 'noConnection', reason: 'Unreachable', message: 'the credentials were refused' },
      10_000,
    );
    expect(outcome.ready).toMatchObject({ status: 'False', reason: 'Unauthorized' });
    expect(outcome.reconciling).toEqual({ reason: PROGRESSING_WITH_RETRY, message: 'looking again in 10 s' });
  });

  it('its credentials Secret missing: Ready=False (CredentialsMissing), looked at again (the Secret is not watched)', () => {
    const outcome = instanceOutcome(
      secretMissing,
      { phase: 'noConnection', reason: 'CredentialsMissing', message: 'Secret vc-creds does not exist' },
      10_000,
    );
    expect(outcome).toEqual({
      ready: { status: 'False', reason: 'CredentialsMissing', message: 'Secret vc-creds does not exist' },
      conditions: [
        {
          type: 'Syncing',
          status: 'False',
          reason: 'CredentialsMissing',
          message: 'Secret vc-creds does not exist',
        },
      ],
      reconciling: { reason: PROGRESSING_WITH_RETRY, message: 'looking again in 10 s' },
      requeueAfter: 10_000,
    });
    expect(outcome.stalled).toBeUndefined();
  });
});

describe('stallOf and stalledOutcome: what only a change of the instance resolves', () => {
  const synced = { credentialsSecretRef: { name: 'c' }, config: 'sync: {}' };
  const valid = validateSyncConfig('sync: {}');
  const refusal: PlacementProblem = {
    field: 'spec.clusterRef.namespace',
    reason: 'FieldValueForbidden',
    message: 'namespace "kube-system" is not a namespace of project "team"',
  };

  it('nothing in the way: not stalled (whatever the Secret or the virtual cluster say)', () => {
    expect(stallOf(vci({ credentialsSecretRef: { name: 'c' } }) as never, undefined, [])).toBeUndefined();
    expect(stallOf(vci(synced) as never, valid, [])).toBeUndefined();
  });

  it('no credentialsSecretRef: Stalled and Ready=False, CredentialsMissing; no Syncing', () => {
    for (const spec of [{}, { config: 'sync: {}' }]) {
      const stall = stallOf(vci(spec) as never, spec.config ? valid : undefined, [])!;
      expect(stall.error).toBeInstanceOf(CredentialsMissing);
      expect(stall.error).toBeInstanceOf(TerminalError);
      const outcome = stalledOutcome(stall);
      expect(outcome).toEqual({
        ready: {
          status: 'False',
          reason: 'CredentialsMissing',
          message: 'spec.credentialsSecretRef is not set, so the platform cannot reach the virtual cluster',
        },
        stalled: stall.error,
        removeConditions: ['Syncing'],
      });
    }
  });

  it('an invalid spec.config: Stalled, InvalidConfig, with what is wrong; Syncing=False says the same', () => {
    const invalid = validateSyncConfig('sync: [');
    const stall = stallOf(vci({ ...synced, config: 'sync: [' }) as never, invalid, [])!;
    expect(stall.error).toBeInstanceOf(InvalidConfig);
    const outcome = stalledOutcome(stall);
    expect(outcome.ready).toMatchObject({ status: 'False', reason: 'InvalidConfig' });
    expect(outcome.ready.message).toMatch(/^spec\.config: \(file\): not valid YAML/);
    expect(outcome.conditions).toEqual([
      { type: 'Syncing', status: 'False', reason: 'InvalidConfig', message: outcome.ready.message },
    ]);
  });

  it('a placement refused: Stalled, PlacementNotAllowed, naming the field; Syncing=False says the same', () => {
    const stall = stallOf(vci(synced) as never, valid, [refusal])!;
    expect(stall.error).toBeInstanceOf(PlacementNotAllowed);
    const outcome = stalledOutcome(stall);
    expect(outcome.ready).toEqual({
      status: 'False',
      reason: 'PlacementNotAllowed',
      message:
        'the syncer may not run: spec.clusterRef.namespace: namespace "kube-system" is not a namespace of project "team"',
    });
    expect(outcome.conditions).toEqual([
      {
        type: 'Syncing',
        status: 'False',
        reason: 'PlacementNotAllowed',
        message: outcome.ready.message,
      },
    ]);
    expect(outcome.reconciling).toBeUndefined();
    expect(outcome.requeueAfter).toBeUndefined();
  });

  it('an instance that does not ask to be synced is not held to its placement or configuration', () => {
    expect(
      stallOf(vci({ credentialsSecretRef: { name: 'c' } }) as never, undefined, [refusal]),
    ).toBeUndefined();
  });
});
