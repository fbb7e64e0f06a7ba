import type { V1Secret } from '@kubernetes/client-node';
import { resources, type Stored } from '../../api/resources.ts';
import type { SharedSecret } from '../../api/sharedsecret.ts';
import { applyObject } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Reconciler } from '../../runtime/controller.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import { deepEqual, ownValue } from '../../runtime/json.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { desiredSecretData, syncSourceOf } from './desired.ts';

/** Index of sync-target Secrets by `<namespace>/<name>` of the SharedSecret they copy. */
export const BY_SOURCE = 'sharedsecret-source';

export function sourceKeyOf(secret: V1Secret): string[] {
  const source = syncSourceOf(secret);
  return source ? [`${source.namespace}/${source.name}`] : [];
}

export interface SecretSyncDeps {
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  secrets: Store<V1Secret>;
  sharedSecrets: Store<Stored<SharedSecret>>;
}

/** The Event action of this controller's Warnings. */
const SYNC_SECRET = 'SyncSecret';

/**
 * Keeps a labelled core Secret filled with its SharedSecret's data. Only the keys this
 * controller applies are its own (server-side apply): keys somebody else wrote stay, keys it
 * copied earlier and no longer should are removed. A Secret without both labels is never read
 * beyond the cache, let alone written.
 *
 * On the reconcile scaffold without its status (`status: false`): a core Secret has no status of
 * ours to write, and needs no finalizer (a copy has nothing to clean up; a Secret being deleted is
 * left alone). Failures are Warning Events on the Secret and retried.
 */
export function secretSyncReconciler(deps: SecretSyncDeps): Reconciler {
  return objectReconciler<V1Secret, never>({
    kind: 'Secret',
    resource: resources.secrets,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.secrets,
    action: SYNC_SECRET,
    status: false,
    apply: (target) => reconcileSecretSync(deps, target),
  });
}

/** Fills the Secret with what its SharedSecret holds of the keys it asks for (a Warning Event for what it lacks). */
async function reconcileSecretSync(deps: SecretSyncDeps, target: V1Secret): Promise<undefined> {
  const source = syncSourceOf(target);
  if (!source) return undefined;
  const shared = deps.sharedSecrets.get(`${source.namespace}/${source.name}`);
  const regarding = {
    apiVersion: 'v1',
    kind: 'Secret',
    name: target.metadata?.name,
    namespace: target.metadata?.namespace,
    uid: target.metadata?.uid,
  };
  if (!shared) {
    // Leave the data as it is: emptying a Secret a workload mounts is worse than a stale copy.
    void deps.events.record(regarding, {
      type: 'Warning',
      reason: 'SharedSecretNotFound',
      action: SYNC_SECRET,
      note: `SharedSecret ${source.namespace}/${source.name} does not exist; the data is left as it is`,
    });
    return undefined;
  }
  const { data, missingKeys } = desiredSecretData(target, shared);
  if (missingKeys.length > 0) {
    void deps.events.record(regarding, {
      type: 'Warning',
      reason: 'SharedSecretKeyNotFound',
      action: SYNC_SECRET,
      note: `SharedSecret ${source.namespace}/${source.name} has no key(s) ${missingKeys.join(', ')}`,
    });
  }
  const targetData = target.data ?? {};
  const current = Object.fromEntries(Object.keys(data).map((k) => [k, ownValue(targetData, k)]));
  const managedKeys = managedDataKeys(target);
  const unchanged = deepEqual(current, data) && managedKeys.every((k) => Object.hasOwn(data, k));
  if (unchanged) return undefined;
  await applyObject(
    deps.api,
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: target.metadata!.name!, namespace: target.metadata!.namespace! },
      data,
    },
    { fieldManager: fieldManagers.secretSync, force: true, resource: resources.secrets },
  );
  return undefined;
}

/** The `data` keys our field manager owns, from managedFields (`f:data` > `f:<key>`). */
function managedDataKeys(secret: V1Secret): string[] {
  const entry = secret.metadata?.managedFields?.find(
    (m) => m.manager === fieldManagers.secretSync && m.operation === 'Apply',
  );
  const fields = (entry?.fieldsV1 as Record<string, Record<string, unknown>> | undefined)?.['f:data'] ?? {};
  return Object.keys(fields)
    .filter((k) => k.startsWith('f:'))
    .map((k) => k.slice(2));
}
