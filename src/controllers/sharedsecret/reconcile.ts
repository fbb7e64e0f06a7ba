import type { V1Role, V1RoleBinding } from '@kubernetes/client-node';
import { CLEANUP_FINALIZER } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type { SharedSecret, SharedSecretStatus } from '../../api/sharedsecret.ts';
import { createOrApply, deleteObject } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import { errorMessage, isApiError, TerminalError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import { deepEqual } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { desiredRbac } from './desired.ts';

/** Index of projected Roles/RoleBindings by `<namespace>/<owning SharedSecret name>`. */
export const BY_OWNER_SECRET = 'owner-sharedsecret';

/**
 * The apiserver refused a projected Role or RoleBinding as invalid (422): for example an object
 * of that name already controlled by another owner, which we never adopt. Retrying cannot help.
 */
export class ProjectionRejected extends TerminalError {}

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
const childId = (child: Child) => `${child.kind}/${child.object.metadata?.name}`;
const resourceOf = (kind: Child['kind']) => (kind === 'Role' ? resources.roles : resources.roleBindings);

/**
 * Converges the Roles and RoleBindings of one SharedSecret and its status. Level-triggered:
 * everything is derived from the caches and the secret's spec, whatever event led here.
 *
 * No finalizer: the projected objects live in the secret's namespace with an owner reference to
 * it, so garbage collection removes them with the secret, and a reconcile of a secret that is
 * gone deletes whatever is left (whether or not garbage collection runs). The writes per secret
 * are thus its creation, a Role and a RoleBinding per rule, and one status write.
 */
export function sharedSecretReconciler(deps: SharedSecretReconcilerDeps) {
  return objectReconciler<Stored<SharedSecret>, SharedSecretStatus>({
    kind: 'SharedSecret',
    resource: resources.sharedSecrets,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.sharedSecrets,
    // Earlier versions guarded cleanup with a finalizer; it is removed when such a secret goes.
    formerFinalizers: [CLEANUP_FINALIZER],
    action: 'ProjectAccess',
    statusOf: (secret) => ({ dataKeys: Object.keys(secret.spec.data ?? {}).sort() }),
    apply: (secret) => reconcileSharedSecret(deps, secret),
    cleanup: (key) => deleteProjection(deps, key),
  });
}

/**
 * Writes the Roles and RoleBindings `secret.spec.access` asks for that the cluster lacks or holds
 * otherwise, then deletes those it no longer asks for.
 */
async function reconcileSharedSecret(
  deps: SharedSecretReconcilerDeps,
  secret: Stored<SharedSecret>,
): Promise<Converged<SharedSecretStatus>> {
  const key = `${secret.metadata.namespace}/${secret.metadata.name}`;
  const desired = desiredRbac(secret);
  const wanted: Child[] = [
    ...desired.roles.map((object) => ({ kind: 'Role' as const, object })),
    ...desired.roleBindings.map((object) => ({ kind: 'RoleBinding' as const, object })),
  ];
  const changes = wanted
    .map((child) => ({ child, current: currentOf(deps, child) }))
    .filter(({ child, current }) => !matches(current, child, secret.metadata.uid));
  // Roles before RoleBindings: a binding that gains subjects must never meet a Role's old, wider
  // rules, nor a same-named Role we do not control (one someone made before the secret existed,
  // which our write then takes over, or refuses when another owner controls it).
  for (const kind of ['Role', 'RoleBinding'] as const) {
    await Promise.all(
      changes
        .filter(({ child }) => child.kind === kind)
        .map(({ child, current }) => writeChild(deps, child, current)),
    );
  }
  const wantedIds = new Set(wanted.map(childId));
  await Promise.all(
    childrenOf(deps, key)
      .filter((c) => !wantedIds.has(childId(c)))
      .map((child) => deleteChild(deps, child)),
  );
  return {
    ready: { status: 'True', reason: 'Projected', message: 'Roles and RoleBindings match spec.access' },
  };
}

/** Deletes every Role and RoleBinding projected for the secret `key` (`namespace/name`). */
async function deleteProjection(deps: SharedSecretReconcilerDeps, key: string): Promise<void> {
  await Promise.all(childrenOf(deps, key).map((child) => deleteChild(deps, child)));
}

/** The Roles and RoleBindings the caches hold for the secret `key`. */
function childrenOf(deps: SharedSecretReconcilerDeps, key: string): Child[] {
  return [
    ...deps.roles.byIndex(BY_OWNER_SECRET, key).map((object) => ({ kind: 'Role' as const, object })),
    ...deps.roleBindings
      .byIndex(BY_OWNER_SECRET, key)
      .map((object) => ({ kind: 'RoleBinding' as const, object })),
  ];
}

function storeOf(deps: SharedSecretReconcilerDeps, kind: Child['kind']): Store<V1Role | V1RoleBinding> {
  return (kind === 'Role' ? deps.roles : deps.roleBindings) as Store<V1Role | V1RoleBinding>;
}

/** The child as last known: the cache, or our own write the cache has not caught up with. */
function currentOf(deps: SharedSecretReconcilerDeps, child: Child): Child | undefined {
  const object = storeOf(deps, child.kind).fresh(
    `${child.object.metadata?.namespace}/${child.object.metadata?.name}`,
  );
  return object ? ({ kind: child.kind, object } as Child) : undefined;
}

function deleteChild(deps: SharedSecretReconcilerDeps, child: Child): Promise<void> {
  return deleteObject(deps.api, resourceOf(child.kind), child.object);
}

async function writeChild(deps: SharedSecretReconcilerDeps, child: Child, current: Child | undefined) {
  try {
    const written = await createOrApply(deps.api, child.object, {
      fieldManager: fieldManagers.sharedSecret,
      resource: resourceOf(child.kind),
      cached: current !== undefined,
    });
    storeOf(deps, child.kind).recordWrite(written, current?.object.metadata?.resourceVersion);
  } catch (err) {
    if (!isApiError(err, 422)) throw err;
    throw new ProjectionRejected(`${child.kind} ${child.object.metadata?.name}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
}

/** Whether a child already has the desired content and owner (so no write is needed). */
function matches(existing: Child | undefined, desired: Child, ownerUid: string | undefined): boolean {
  if (!existing?.object.metadata?.ownerReferences?.some((r) => r.uid === ownerUid)) return false;
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
