import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { API_GROUP } from '../api/meta.ts';
import { Admission, UnexpectedAdmissionRequest, VALIDATE_PATH, VALIDATE_SECRETS_PATH } from './admission.ts';
import type { ClusterState } from './cluster-state.ts';
import { rulesOfTable } from './configurations.ts';
import { allow, forbidden } from './decision.ts';
import type { Policy, PolicyTable } from './policies.ts';
import type { AdmissionRequest } from './review.ts';

/**
 * The dispatcher over the policy table. The cluster is our own edge interface (`ClusterState`),
 * answered here by a recorder that refuses every lookup a test did not provide, so a test also
 * shows which lookups a request makes; the apiserver side is covered by e2e/webhooks/.
 */
function recordingCluster(provided: Partial<ClusterState>): { cluster: ClusterState; calls: string[] } {
  const calls: string[] = [];
  const cluster = new Proxy(provided as ClusterState, {
    get(target, property: string) {
      return (...args: unknown[]) => {
        calls.push(property);
        const provide = (target as unknown as Record<string, (...a: unknown[]) => unknown>)[property];
        if (!provide) throw new Error(`unexpected lookup ${property}`);
        return provide(...args);
      };
    },
  });
  return { cluster, calls };
}

const accessKeyCreate = (spec: Record<string, unknown>): AdmissionRequest => ({
  uid: 'u-1',
  kind: { group: API_GROUP, version: 'v1', kind: 'OwnedAccessKey' },
  resource: { group: API_GROUP, version: 'v1', resource: 'ownedaccesskeys' },
  operation: 'CREATE',
  userInfo: { username: 'alice', groups: [] },
  object: { metadata: { name: 'k', uid: 'uid-k' }, spec },
});

const VALID_KEY_SPEC = { user: 'alice', keyHash: 'a'.repeat(64), keyId: 'abcdefghijkl' };

describe('Admission dispatch over the policy table', () => {
  it('claims the id of a key every check admitted, and of a refused key nothing', async () => {
    const { cluster, calls } = recordingCluster({ claimKeyId: async () => 'claimed' });
    const admission = new Admission(cluster, 'platform');

    const admitted = await admission.review(VALIDATE_PATH, accessKeyCreate(VALID_KEY_SPEC));
    expect(admitted.allowed).toBe(true);
    expect(calls).toEqual(['claimKeyId']);

    calls.length = 0;
    const refused = await admission.review(
      VALIDATE_PATH,
      accessKeyCreate({ ...VALID_KEY_SPEC, keyHash: 'x' }),
    );
    expect(refused).toMatchObject({ allowed: false, code: 422, causes: [{ field: 'spec.keyHash' }] });
    expect(calls).toEqual([]);
  });

  it('denies with 500 when a lookup fails, naming the failure class and not what the apiserver said', async () => {
    const { cluster } = recordingCluster({
      identityExists: async () => {
        throw new ApiException(500, 'the apiserver body', 'token=hunter2', {});
      },
    });
    const request: AdmissionRequest = {
      ...accessKeyCreate({}),
      kind: { group: API_GROUP, version: 'v1', kind: 'SharedSecret' },
      resource: { group: API_GROUP, version: 'v1', resource: 'sharedsecrets' },
      object: {
        metadata: { name: 's', namespace: 'n' },
        spec: { access: [{ verbs: ['get'], users: ['bob'] }] },
      },
    };
    const decision = await new Admission(cluster, 'platform').review(VALIDATE_PATH, request);
    expect(decision).toMatchObject({ allowed: false, code: 500, reason: 'InternalError' });
    expect(decision.message).toBe('the admission webhook could not decide: the apiserver answered 500');
  });

  it("looks up a new provisioned instance's template and refuses it when missing; an update looks up nothing", async () => {
    const templates = new Set(['small']);
    const { cluster, calls } = recordingCluster({
      namespaceProjects: async (names) => new Map(names.map((n) => [n, 'team'])),
      templateExists: async (name) => templates.has(name),
    });
    const admission = new Admission(cluster, 'platform');
    const instance = (template: string): AdmissionRequest => ({
      ...accessKeyCreate({}),
      kind: { group: API_GROUP, version: 'v1', kind: 'VirtualClusterInstance' },
      resource: { group: API_GROUP, version: 'v1', resource: 'virtualclusterinstances' },
      object: { metadata: { name: 'dev', namespace: 'p-team' }, spec: { templateRef: { name: template } } },
    });
    expect((await admission.review(VALIDATE_PATH, instance('small'))).allowed).toBe(true);
    expect(calls).toEqual(['namespaceProjects', 'templateExists']);
    expect(await admission.review(VALIDATE_PATH, instance('gone'))).toMatchObject({
      allowed: false,
      code: 422,
      causes: [{ field: 'spec.templateRef.name', reason: 'FieldValueNotFound' }],
    });
    calls.length = 0;
    const update = { ...instance('gone'), operation: 'UPDATE' as const, oldObject: instance('gone').object };
    expect((await admission.review(VALIDATE_PATH, update)).allowed).toBe(true);
    expect(calls).not.toContain('templateExists');
  });

  it('refuses a resource its path does not review as misrouted', async () => {
    const { cluster, calls } = recordingCluster({});
    const admission = new Admission(cluster, 'platform');
    await expect(admission.review(VALIDATE_SECRETS_PATH, accessKeyCreate(VALID_KEY_SPEC))).rejects.toThrow(
      UnexpectedAdmissionRequest,
    );
    await expect(admission.review('/elsewhere', accessKeyCreate(VALID_KEY_SPEC))).rejects.toThrow(
      UnexpectedAdmissionRequest,
    );
    expect(calls).toEqual([]);
  });
});

describe('webhook rules from a policy table', () => {
  const nothing: Policy = { gather: async () => undefined, decide: () => allow() };
  const refuse: Policy = { gather: async () => undefined, decide: () => forbidden('no') };

  it('registers each resource for exactly the operations its chains cover, other groups not at all', () => {
    const table: PolicyTable = {
      [`projects.${API_GROUP}`]: { CREATE: { checks: [nothing] }, UPDATE: { checks: [nothing] } },
      [`teams.${API_GROUP}`]: { CREATE: { checks: [nothing] }, UPDATE: { checks: [refuse] } },
      [`users.${API_GROUP}`]: { DELETE: { checks: [refuse] } },
      secrets: { CREATE: { checks: [refuse] } },
    };
    expect(rulesOfTable(table, API_GROUP, 'v1', '*')).toEqual([
      {
        apiGroups: [API_GROUP],
        apiVersions: ['v1'],
        operations: ['CREATE', 'UPDATE'],
        resources: ['projects', 'teams'],
        scope: '*',
      },
      {
        apiGroups: [API_GROUP],
        apiVersions: ['v1'],
        operations: ['DELETE'],
        resources: ['users'],
        scope: '*',
      },
    ]);
  });
});
