import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import {
  notProvisionedOutcome,
  PROVISION_RETRY_MS,
  provisionEvent,
  provisionedConfigText,
  provisionedState,
  provisionFailureMessage,
  provisioningEvent,
  STARTING_RETRY_MS,
  syncedPlaces,
  withProvisioned,
} from './provisioned.ts';

const vci = (config?: string) => ({ spec: { templateRef: { name: 't' }, ...(config ? { config } : {}) } });
const template = (config?: string) => ({ spec: config ? { config } : {} });

describe('provisionedConfigText', () => {
  it("is the instance's spec.config, else its template's, else none", () => {
    expect(provisionedConfigText(vci('own'), template('default'))).toBe('own');
    expect(provisionedConfigText(vci(), template('default'))).toBe('default');
    expect(provisionedConfigText(vci(), template())).toBeUndefined();
    expect(provisionedConfigText(vci(), undefined)).toBeUndefined();
  });
});

describe('provisionedState', () => {
  it('True only when the control plane is Ready', () => {
    expect(provisionedState({ kind: 'ensured', status: { phase: 'Ready' } })).toMatchObject({
      status: 'True',
      reason: 'Provisioned',
    });
    for (const phase of ['Starting', 'Stopped', 'Absent'] as const)
      expect(provisionedState({ kind: 'ensured', status: { phase } })).toMatchObject({
        status: 'False',
        reason: 'Starting',
      });
    expect(
      provisionedState({ kind: 'ensured', status: { phase: 'Failed', message: 'etcd exited 1' } }),
    ).toEqual({ status: 'False', reason: 'ProvisionFailed', message: 'etcd exited 1' });
  });

  it('a missing template is TemplateNotFound naming it', () => {
    expect(provisionedState({ kind: 'templateNotFound', template: 'small' })).toEqual({
      status: 'False',
      reason: 'TemplateNotFound',
      message: 'VirtualClusterTemplate small (spec.templateRef) does not exist',
    });
  });

  it("a provisioner's error is ProvisionFailed; an apiserver's answer by its code only, never its body", () => {
    const body = JSON.stringify({ message: 'data: c2VjcmV0LWtleQ==' });
    const answer = new ApiException(422, 'Unprocessable', body, {});
    const state = provisionedState({ kind: 'failed', error: answer });
    expect(state).toEqual({
      status: 'False',
      reason: 'ProvisionFailed',
      message: 'the host apiserver answered 422',
    });
    expect(provisionFailureMessage(new RangeError('no free port'))).toBe('RangeError: no free port');
    expect(provisionFailureMessage(new Error('x'.repeat(5000)))).toHaveLength(1000);
  });
});

describe('events of the phases', () => {
  const ready = provisionedState({ kind: 'ensured', status: { phase: 'Ready' } });
  const failed = provisionedState({ kind: 'failed', error: new Error('etcd exited 1') });
  const starting = provisionedState({ kind: 'ensured', status: { phase: 'Starting' } });

  it('Provisioning before the first ensure, not again while it starts, fails or runs', () => {
    expect(provisioningEvent(undefined)).toMatchObject({ type: 'Normal', reason: 'Provisioning' });
    expect(provisioningEvent({ status: 'False', reason: 'TemplateNotFound' })).toMatchObject({
      reason: 'Provisioning',
    });
    for (const before of [ready, failed, starting]) expect(provisioningEvent(before)).toBeUndefined();
  });

  it('Provisioned when it becomes True; ProvisionFailed (Warning) when it fails anew; nothing otherwise', () => {
    expect(provisionEvent(undefined, ready)).toMatchObject({ type: 'Normal', reason: 'Provisioned' });
    expect(provisionEvent(starting, ready)).toMatchObject({ reason: 'Provisioned' });
    expect(provisionEvent(ready, ready)).toBeUndefined();
    expect(provisionEvent(undefined, failed)).toMatchObject({ type: 'Warning', reason: 'ProvisionFailed' });
    expect(provisionEvent(failed, failed)).toBeUndefined();
    const other = provisionedState({ kind: 'failed', error: new Error('apiserver exited 2') });
    expect(provisionEvent(failed, other)).toMatchObject({ reason: 'ProvisionFailed' });
    expect(provisionEvent(undefined, starting)).toBeUndefined();
  });
});

describe('outcomes', () => {
  it('not provisioned: Ready False with the same reason, no Syncing, retried unless only a template helps', () => {
    const failed = notProvisionedOutcome(provisionedState({ kind: 'failed', error: new Error('boom') }));
    expect(failed.ready).toEqual({ status: 'False', reason: 'ProvisionFailed', message: 'Error: boom' });
    expect(failed.conditions).toEqual([
      { type: 'Provisioned', status: 'False', reason: 'ProvisionFailed', message: 'Error: boom' },
    ]);
    expect(failed.removeConditions).toEqual(['Syncing']);
    expect(failed.requeueAfter).toBe(PROVISION_RETRY_MS);
    const starting = notProvisionedOutcome(
      provisionedState({ kind: 'ensured', status: { phase: 'Starting' } }),
    );
    expect(starting.requeueAfter).toBe(STARTING_RETRY_MS);
    expect(starting.reconciling?.message).toBe('looking again in 1 s');
    const noTemplate = notProvisionedOutcome(provisionedState({ kind: 'templateNotFound', template: 't' }));
    expect(noTemplate.requeueAfter).toBeUndefined();
    expect(noTemplate.stalled).toBeUndefined();
  });

  it("provisioned: the syncer's outcome with Provisioned added, looked at again sooner while not Ready", () => {
    const state = provisionedState({ kind: 'ensured', status: { phase: 'Ready' } });
    const syncing = {
      type: 'Syncing',
      status: 'True' as const,
      reason: 'Synced',
      message: 'syncing Service',
    };
    const ready = withProvisioned(
      {
        ready: { status: 'True', reason: 'Ready', message: 'ok' },
        conditions: [syncing],
        requeueAfter: 60_000,
      },
      state,
    );
    expect(ready.conditions).toEqual([syncing, { type: 'Provisioned', ...state }]);
    expect(ready.requeueAfter).toBe(60_000);
    const notReady = withProvisioned(
      { ready: { status: 'False', reason: 'Unreachable', message: 'no' }, requeueAfter: 10_000 },
      state,
    );
    expect(notReady.requeueAfter).toBe(PROVISION_RETRY_MS);
    const startingState = provisionedState({ kind: 'ensured', status: { phase: 'Starting' } });
    const starting = withProvisioned(
      { ready: { status: 'False', reason: 'Unreachable', message: 'no' }, requeueAfter: 10_000 },
      startingState,
    );
    expect(starting.requeueAfter).toBe(STARTING_RETRY_MS);
  });
});

describe('syncedPlaces', () => {
  const binding = (namespace: string, role: string) => ({
    metadata: { namespace, name: `b-${role}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
  });
  it("is each (namespace, kind) a syncer's RoleBindings allow; a binding to another role names nothing", () => {
    expect(
      syncedPlaces([
        binding('team', 'platform-vcluster-syncer-configmaps'),
        binding('team', 'platform-vcluster-syncer-services'),
        binding('team-b', 'platform-vcluster-syncer-endpoints'),
        binding('team', 'admin'),
      ]),
    ).toEqual([
      { namespace: 'team', kind: 'ConfigMap' },
      { namespace: 'team', kind: 'Service' },
      { namespace: 'team-b', kind: 'Endpoints' },
    ]);
  });
});
