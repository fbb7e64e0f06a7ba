import { describe, expect, it } from 'vitest';
import { INSTANCE_UID_LABEL } from '../../api/labels.ts';
import {
  desiredSyncerIdentity,
  instanceKeyOf,
  roleBindingMatches,
  SYNCER_CLUSTER_ROLES,
  serviceAccountMatches,
  syncerServiceAccountName,
} from './identity.ts';

const vci = (namespace: string, name: string, uid = 'uid-1') => ({ metadata: { namespace, name, uid } });

describe('desiredSyncerIdentity', () => {
  it('a ServiceAccount of its own and one RoleBinding per synced kind, all in the host namespace', () => {
    const identity = desiredSyncerIdentity(vci('p-team', 'dev'), 'p-team', [
      'Service',
      'Endpoints',
      'Service',
    ]);
    const account = identity.serviceAccount.metadata!;
    expect(account.namespace).toBe('p-team');
    expect(account.name).toMatch(/^vcluster-syncer-dev-[0-9a-f]{10}$/);
    expect(account.labels?.[INSTANCE_UID_LABEL]).toBe('uid-1');
    expect(identity.serviceAccount.automountServiceAccountToken).toBe(false);
    expect(identity.roleBindings.map((b) => b.roleRef.name)).toEqual([
      SYNCER_CLUSTER_ROLES.Endpoints,
      SYNCER_CLUSTER_ROLES.Service,
    ]);
    for (const binding of identity.roleBindings) {
      expect(binding.metadata?.namespace).toBe('p-team');
      expect(binding.roleRef.kind).toBe('ClusterRole');
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: account.name, namespace: 'p-team' }]);
    }
    expect(new Set(identity.roleBindings.map((b) => b.metadata?.name)).size).toBe(2);
  });

  it('only the kinds given: Secrets are bound only when synced', () => {
    const kinds = (list: Parameters<typeof desiredSyncerIdentity>[2]) =>
      desiredSyncerIdentity(vci('a', 'b'), 'a', list).roleBindings.map((b) => b.roleRef.name);
    expect(kinds(['Service'])).toEqual([SYNCER_CLUSTER_ROLES.Service]);
    expect(kinds([])).toEqual([]);
    expect(kinds(['Secret', 'ConfigMap'])).toEqual([
      SYNCER_CLUSTER_ROLES.ConfigMap,
      SYNCER_CLUSTER_ROLES.Secret,
    ]);
  });

  it('instances of the same name in different namespaces get different identities', () => {
    expect(syncerServiceAccountName(vci('p-a', 'dev'))).not.toBe(syncerServiceAccountName(vci('p-b', 'dev')));
    expect(syncerServiceAccountName(vci('p-a', 'x'.repeat(80))).length).toBeLessThanOrEqual(63);
  });

  it('children map back to the instance key through their annotation', () => {
    const { serviceAccount } = desiredSyncerIdentity(vci('p-team', 'dev'), 'p-team', ['Service']);
    expect(instanceKeyOf(serviceAccount)).toEqual(['p-team/dev']);
    expect(instanceKeyOf({ metadata: { annotations: {} } })).toEqual([]);
    expect(
      instanceKeyOf({
        metadata: { annotations: { [Object.keys(serviceAccount.metadata!.annotations!)[0]!]: 'no-slash' } },
      }),
    ).toEqual([]);
  });
});

describe('matching the caches', () => {
  const desired = desiredSyncerIdentity(vci('n', 'v'), 'n', ['Service']);
  it('extra labels others add do not matter; ours, roleRef and subjects do', () => {
    const binding = desired.roleBindings[0]!;
    const withExtra = {
      ...binding,
      metadata: { ...binding.metadata, labels: { ...binding.metadata?.labels, other: 'x' } },
    };
    expect(roleBindingMatches(withExtra, binding)).toBe(true);
    expect(roleBindingMatches(undefined, binding)).toBe(false);
    expect(
      roleBindingMatches({ ...binding, roleRef: { ...binding.roleRef, name: 'cluster-admin' } }, binding),
    ).toBe(false);
    expect(
      roleBindingMatches(
        { ...binding, subjects: [...(binding.subjects ?? []), { kind: 'User', name: 'mallory' }] },
        binding,
      ),
    ).toBe(false);
    const account = desired.serviceAccount;
    expect(serviceAccountMatches(account, account)).toBe(true);
    expect(serviceAccountMatches({ ...account, automountServiceAccountToken: true }, account)).toBe(false);
    expect(
      serviceAccountMatches({ ...account, metadata: { ...account.metadata, labels: {} } }, account),
    ).toBe(false);
  });
});
