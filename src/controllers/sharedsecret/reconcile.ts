import type { V1Role, V1RoleBinding } from '@kubernetes/client-node';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import { applyObject, deepEqual, patchStatus } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { type Condition, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import { errorReason, isNotFound } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { addFinalizer, isBeingDeleted, removeFinalizer } from '../../runtime/finalizers.ts';
import { type KubeApi, objectPath } from '../../runtime/kube-client.ts';
import type { Store } from '../../runtime/store.ts';
import { fieldManagers, resources, type Stored } from '../resources.ts';
import { desiredRbac } from './desired.ts';

export const CLEANUP_FINALIZER = 'management.platform/cleanup';
/** Index of projected Roles/RoleBindings by `<namespace>/<owning SharedSecret name>`. */
export const BY_OWNER_SECRET = 'owner-sharedsecret';

export interface SharedSecretReconcilerDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  sharedSecrets: Store<Stored<SharedSecret>>;
  roles: Store<V1Role>;
  roleBindings: Store<V1RoleBinding>;
}

/** `<ns>/<secret>` for a Role or RoleBinding whose controller is a SharedSecret. */
export function ownerSecretKey(object: V1Role | V1RoleBinding): string[] {
  const owner = object.metadata?.ownerReferences?.find(
    (ref) => ref.controller && ref.kind === 'SharedSecret',
  );
  return owner ? [`${object.metadata?.namespace}/${owner.name}`] : [];
}

type Child = { kind: 'Role'; object: V1Role } | { kind: 'RoleBinding'; object: V1RoleBinding };

/**
 * Converges the Roles and RoleBindings of one SharedSecret and its status. Level-triggered:
 * everything is derived from the caches and the secret's spec, whatever event led here.
 */
export function sharedSecretReconciler(deps: SharedSecretReconcilerDeps) {
  const { api, sharedSecrets, roles, roleBindings } = deps;

  const childrenOf = (key: string): Child[] => [
    ...roles.byIndex(BY_OWNER_SECRET, key).map((object) => ({ kind: 'Role' as const, object })),
    ...roleBindings.byIndex(BY_OWNER_SECRET, key).map((object) => ({ kind: 'RoleBinding' as const, object })),
  ];

  const deleteChild = async (child: Child) => {
    const resource = child.kind === 'Role' ? resources.roles : resources.roleBindings;
    const { namespace, name, uid } = child.object.metadata ?? {};
    try {
      await api.request({
        method: 'DELETE',
        path: objectPath(resource, namespace, name ?? ''),
        // Never delete a same-named object that replaced the one we saw.
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } },
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  };

  return async function reconcile(key: string): Promise<ReconcileResult | undefined> {
    const secret = sharedSecrets.get(key);
    if (!secret) {
      // Gone without our finalizer (or before we saw it): remove what it left behind, whether or
      // not garbage collection runs.
      await Promise.all(childrenOf(key).map(deleteChild));
      return undefined;
    }
    if (isBeingDeleted(secret)) {
      await Promise.all(childrenOf(key).map(deleteChild));
      await removeFinalizer(api, resources.sharedSecrets, secret, CLEANUP_FINALIZER);
      return undefined;
    }
    const current = await addFinalizer(api, resources.sharedSecrets, secret, CLEANUP_FINALIZER);

    let ready: Omit<Condition, 'lastTransitionTime'>;
    try {
      await converge(current);
      ready = {
        type: 'Ready',
        status: 'True',
        reason: 'Projected',
        message: 'Roles and RoleBindings match spec.access',
      };
    } catch (err) {
      const reason = errorReason(err);
      const message = `projecting spec.access failed: ${err instanceof Error ? err.message : String(err)}`;
      ready = { type: 'Ready', status: 'False', reason, message };
      await writeStatus(current, ready).catch(() => {});
      void deps.events.record(regardingOf(current), {
        type: 'Warning',
        reason,
        action: 'ProjectAccess',
        note: message,
      });
      throw err;
    }
    await writeStatus(current, ready);
    return undefined;
  };

  async function converge(secret: Stored<SharedSecret>): Promise<void> {
    const key = `${secret.metadata.namespace}/${secret.metadata.name}`;
    const desired = desiredRbac(secret);
    const wanted: Child[] = [
      ...desired.roles.map((object) => ({ kind: 'Role' as const, object })),
      ...desired.roleBindings.map((object) => ({ kind: 'RoleBinding' as const, object })),
    ];
    const wantedNames = new Set(wanted.map((c) => `${c.kind}/${c.object.metadata?.name}`));
    const existing = childrenOf(key).filter((c) =>
      c.object.metadata?.ownerReferences?.some((r) => r.uid === secret.metadata.uid),
    );
    const existingByName = new Map(existing.map((c) => [`${c.kind}/${c.object.metadata?.name}`, c]));

    // Roles before RoleBindings: a binding to a Role that does not exist yet grants nothing, but
    // the reverse order would briefly show a binding to a stale Role.
    for (const kind of ['Role', 'RoleBinding'] as const) {
      await Promise.all(
        wanted
          .filter((c) => c.kind === kind)
          .filter((c) => !matches(existingByName.get(`${c.kind}/${c.object.metadata?.name}`), c))
          .map((c) =>
            applyObject(api, c.object, {
              fieldManager: fieldManagers.sharedSecret,
              force: true,
              resource: kind === 'Role' ? resources.roles : resources.roleBindings,
            }),
          ),
      );
    }
    const stale = childrenOf(key).filter((c) => !wantedNames.has(`${c.kind}/${c.object.metadata?.name}`));
    await Promise.all(stale.map(deleteChild));
  }

  async function writeStatus(
    secret: Stored<SharedSecret>,
    ready: Omit<Condition, 'lastTransitionTime'>,
  ): Promise<void> {
    const now = new Date(deps.clock.now());
    const conditions = setCondition(
      (secret.status?.conditions ?? []) as Condition[],
      { ...ready, observedGeneration: secret.metadata.generation },
      now,
    );
    const dataKeys = Object.keys(secret.spec.data ?? {}).sort();
    await patchStatus(api, resources.sharedSecrets, secret, { ...secret.status, conditions, dataKeys });
  }
}

/** Whether a cached child already has the desired content (so no write is needed). */
function matches(existing: Child | undefined, desired: Child): boolean {
  if (!existing) return false;
  const a = existing.object;
  const b = desired.object;
  const labels = b.metadata?.labels ?? {};
  const sameMeta =
    Object.entries(labels).every(([k, v]) => a.metadata?.labels?.[k] === v) &&
    deepEqual(a.metadata?.ownerReferences, b.metadata?.ownerReferences);
  if (!sameMeta) return false;
  if (desired.kind === 'Role') return deepEqual((a as V1Role).rules, (b as V1Role).rules);
  const binding = b as V1RoleBinding;
  return (
    deepEqual((a as V1RoleBinding).subjects ?? [], binding.subjects ?? []) &&
    deepEqual((a as V1RoleBinding).roleRef, binding.roleRef)
  );
}

function regardingOf(secret: SharedSecret) {
  return {
    apiVersion: secret.apiVersion,
    kind: 'SharedSecret',
    name: secret.metadata.name,
    namespace: secret.metadata.namespace,
    uid: secret.metadata.uid,
  };
}
