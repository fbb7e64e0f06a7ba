import { PatchStrategy } from '@kubernetes/client-node';
import type { OwnedAccessKey, SsoIdentity } from '../../api/ownedaccesskey.ts';
import { resources, type Stored } from '../../api/resources.ts';
import { patchStatus } from '../../runtime/apply.ts';
import { type ConditionInput, setCondition } from '../../runtime/conditions.ts';
import type { ReconcileContext, Reconciler } from '../../runtime/controller.ts';
import { errorReason, isConflict, isNotFound, RuntimeError } from '../../runtime/errors.ts';
import { objectPath } from '../../runtime/kube-client.ts';
import { objectReconciler, type Settled } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import type { ReconcilerDeps } from '../common.ts';
import { IDENTITY_REFRESHED_CONDITION, refreshFailed, refreshSchedule } from './desired.ts';
import type { IdentityProviders } from './providers.ts';

/**
 * Identity refresh (`spec.identityRefresh`): a Login key signed in through a provider that can be
 * asked again keeps its `identity` current. Every `intervalMs` after its last refresh, the
 * connector is asked with what it kept in `connectorData` (a refresh token, a provider token; the
 * cluster manager asks with the platform's own key): the answer goes through the same mapping and
 * group rules as a sign-in, the User's groups and team memberships follow it (the connectors' side,
 * {@link IdentityProviders}, which sign-in implements; the User is never made again), and the key's identity, connectorData (a rotated refresh token) and
 * `identityRefresh` are written.
 *
 * When the provider no longer vouches for the person (a revoked or expired grant, the user gone or
 * disabled there, no longer in the required groups or domain, now another username), the key is
 * disabled (`spec.disabled`; the access-key controller says so in `Ready`) and the
 * `IdentityRefreshed` condition says why, with a Warning Event on the User: the person signs in
 * again. A provider that cannot be reached leaves the key as it is, with `IdentityRefreshed`
 * False `RefreshFailed` and a Warning Event `RefreshFailed` on the key, and is asked again with
 * backoff. A key whose connector was removed from
 * the configuration is no longer refreshed (`ConnectorRemoved`). Password and SAML sign-ins have
 * nothing to refresh.
 */

const MAX_WRITE_ATTEMPTS = 5;

export interface IdentityRefreshDeps extends ReconcilerDeps {
  readonly keys: Store<Stored<OwnedAccessKey>>;
  readonly providers: IdentityProviders;
  readonly intervalMs: number;
}

/** The key changed at every attempt to write to it (each read again, each refused as stale). */
export class KeyKeptChanging extends RuntimeError {}

/**
 * The identity refresh reconciler, on the reconcile scaffold (`objectReconciler`) without the
 * scaffold's status (`status: false`): the key's `Ready` and `status.observedGeneration` are the
 * access-key controller's; this controller owns only `IdentityRefreshed`, and writes it itself,
 * because where and when it is written is part of the refresh:
 *
 * - on the key read from the apiserver after the refreshed identity was written (the spec write
 *   changed its resourceVersion; the scaffold's deferred write would be refused as stale);
 * - before the key is disabled (the refresh then skips the key: a condition left for later would
 *   never be written);
 * - with the key's resourceVersion as a precondition, retried on the key read again (the
 *   conditions list is written whole: a stale copy would drop the access-key controller's `Ready`).
 *
 * The scaffold gives the rest: the key from the cache, nothing for a key that is gone or being
 * deleted, a Warning Event on the key for a failed refresh (`RefreshFailed`, whose message names
 * only the class of its cause, as the condition does: a provider's answer stays in the logs),
 * and the retry with backoff. A failed write of the condition after a failed refresh is logged,
 * never swallowed; the refresh's failure is the one rethrown.
 */
export function identityRefreshReconciler(deps: IdentityRefreshDeps): Reconciler {
  return objectReconciler<Stored<OwnedAccessKey>, never>({
    kind: 'OwnedAccessKey',
    resource: resources.ownedAccessKeys,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.keys,
    action: 'RefreshIdentity',
    status: false,
    apply: (cached, ctx) => reconcileIdentityRefresh(deps, cached, ctx),
  });
}

/**
 * Refreshes the key's identity when it is due (by the cache, then by the key read from the
 * apiserver), and says when to look again.
 */
async function reconcileIdentityRefresh(
  deps: IdentityRefreshDeps,
  cached: Stored<OwnedAccessKey>,
  ctx: ReconcileContext,
): Promise<Settled | undefined> {
  const due = refreshSchedule(cached, deps.intervalMs, deps.clock.now());
  if (due.action === 'skip') return undefined;
  if (due.action === 'wait') return { requeueAfter: due.inMs };
  // Due by the cache: decided again on the key itself, whose grant is the one to use (a grant
  // used twice is refused by providers that rotate refresh tokens).
  const key = await readKey(deps, cached.metadata.name ?? '');
  if (!key) return undefined;
  const schedule = refreshSchedule(key, deps.intervalMs, deps.clock.now());
  if (schedule.action === 'skip') return undefined;
  if (schedule.action === 'wait') return { requeueAfter: schedule.inMs };
  try {
    return await refresh(deps, key);
  } catch (err) {
    // Deleted meanwhile: nothing left to refresh.
    if (isNotFound(err)) return undefined;
    const failed = refreshFailed(err);
    try {
      await setRefreshed(deps, key, {
        status: 'False',
        reason: errorReason(failed),
        message: failed.message,
      });
    } catch (writeErr) {
      ctx.logger.warn(
        { err: writeErr, reason: errorReason(writeErr) },
        `writing ${IDENTITY_REFRESHED_CONDITION} after a failed refresh failed`,
      );
    }
    throw failed;
  }
}

/** The key as the apiserver has it now (the cache may not show our own last write yet). */
async function readKey(deps: IdentityRefreshDeps, name: string): Promise<Stored<OwnedAccessKey> | undefined> {
  try {
    return await deps.api.request<Stored<OwnedAccessKey>>({
      method: 'GET',
      path: objectPath(resources.ownedAccessKeys, undefined, name),
    });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * Sets `IdentityRefreshed` on the key as read, with its resourceVersion as a precondition (the
 * conditions list is written whole: a stale copy would drop the access-key controller's `Ready`);
 * on a conflict, on the key read again. Nothing to write once the key is gone.
 */
async function setRefreshed(
  deps: IdentityRefreshDeps,
  key: Stored<OwnedAccessKey>,
  condition: Omit<ConditionInput, 'type'>,
) {
  const name = key.metadata.name ?? '';
  let current: Stored<OwnedAccessKey> | undefined = key;
  for (let attempt = 0; current && attempt < MAX_WRITE_ATTEMPTS; attempt++) {
    const conditions = setCondition(
      current.status?.conditions,
      { type: IDENTITY_REFRESHED_CONDITION, ...condition },
      new Date(deps.clock.now()),
    );
    try {
      await patchStatus(
        deps.api,
        resources.ownedAccessKeys,
        current,
        { ...current.status, conditions },
        { unchanged: true },
      );
      return;
    } catch (err) {
      if (isNotFound(err)) return;
      if (!isConflict(err)) throw err;
    }
    current = await readKey(deps, name);
  }
  if (current)
    throw new KeyKeptChanging(`the key kept changing while ${IDENTITY_REFRESHED_CONDITION} was written`);
}

async function patchSpec(deps: IdentityRefreshDeps, name: string, spec: Record<string, unknown>) {
  await deps.api.request({
    method: 'PATCH',
    path: objectPath(resources.ownedAccessKeys, undefined, name),
    contentType: PatchStrategy.MergePatch,
    body: { spec },
  });
}

/**
 * Writes the refreshed identity onto the key read before the refresh, with its resourceVersion
 * as a precondition. When the key changed meanwhile, the identity is written all the same (it
 * holds the grant the provider now expects, a rotated refresh token), but `identityRefresh` only
 * when nobody else set it in between (someone asking for a refresh now gets one).
 */
async function writeIdentity(deps: IdentityRefreshDeps, read: Stored<OwnedAccessKey>, identity: SsoIdentity) {
  const name = read.metadata.name ?? '';
  let current: Stored<OwnedAccessKey> | undefined = read;
  for (let attempt = 0; current && attempt < MAX_WRITE_ATTEMPTS; attempt++) {
    const stillOurs = current.spec.identityRefresh === read.spec.identityRefresh;
    try {
      await deps.api.request({
        method: 'PATCH',
        path: objectPath(resources.ownedAccessKeys, undefined, name),
        contentType: PatchStrategy.MergePatch,
        body: {
          metadata: { resourceVersion: current.metadata.resourceVersion },
          spec: {
            identity,
            ...(stillOurs ? { identityRefresh: new Date(deps.clock.now()).toISOString() } : {}),
          },
        },
      });
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    current = await readKey(deps, name);
  }
  if (current) throw new KeyKeptChanging('the key kept changing while its identity was written');
}

async function refreshed(deps: IdentityRefreshDeps, key: Stored<OwnedAccessKey>, identity: SsoIdentity) {
  await writeIdentity(deps, key, identity);
  const latest = await readKey(deps, key.metadata.name ?? '');
  if (!latest) return;
  await setRefreshed(deps, latest, {
    status: 'True',
    reason: 'Refreshed',
    message: 'the identity is as the identity provider last stated it',
  });
}

async function ended(deps: IdentityRefreshDeps, key: Stored<OwnedAccessKey>, err: Error) {
  // The condition first: the access-key controller reacts to the spec change and rewrites the
  // conditions from the object it then sees, which must already hold this one; and once the key
  // is disabled it is no longer refreshed, so a condition left for later would never come.
  await setRefreshed(deps, key, {
    status: 'False',
    reason: 'RefreshRevoked',
    message: `${err.message}; the key is disabled`,
  });
  await patchSpec(deps, key.metadata.name ?? '', { disabled: true });
  void deps.events.record(
    { apiVersion: 'management.platform/v1', kind: 'User', name: key.spec.user ?? '' },
    {
      type: 'Warning',
      reason: 'LoginKeyDisabled',
      action: 'RefreshIdentity',
      note: `login key ${key.metadata.name} was disabled: ${err.message}`,
    },
  );
}

/** Refreshes the key read from the apiserver (due by the cache and by itself). */
async function refresh(deps: IdentityRefreshDeps, key: Stored<OwnedAccessKey>): Promise<Settled | undefined> {
  const identity = key.spec.identity ?? {};
  try {
    const answer = await deps.providers.refresh(key.spec.user ?? '', identity);
    if (answer.outcome === 'nothingToRefresh') return undefined;
    if (answer.outcome === 'connectorRemoved') {
      await setRefreshed(deps, key, {
        status: 'False',
        reason: 'ConnectorRemoved',
        message: `the sign-in method "${identity.connector}" is no longer configured; the identity is no longer refreshed`,
      });
      return undefined;
    }
    await refreshed(deps, key, answer.identity);
    return { requeueAfter: deps.intervalMs };
  } catch (err) {
    if (!deps.providers.endsTheKey(err)) throw err;
    await ended(deps, key, err);
    return undefined;
  }
}
