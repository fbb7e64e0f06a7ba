import { PatchStrategy } from '@kubernetes/client-node';
import type { ConfigStatus } from '../api/config.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources, type Stored } from '../api/resources.ts';
import { platformConfigSource } from '../config/platform-config.ts';
import {
  addController,
  type ControllerDeps,
  DEFAULT_PLATFORM_NAMESPACE,
  type ReconcilerDeps,
  reconcilerDeps,
} from '../controllers/common.ts';
import { patchStatus } from '../runtime/apply.ts';
import { type ConditionInput, setCondition } from '../runtime/conditions.ts';
import type { Reconciler } from '../runtime/controller.ts';
import { errorReason, isConflict, isNotFound, RuntimeError } from '../runtime/errors.ts';
import { objectPath } from '../runtime/kube-client.ts';
import type { Manager } from '../runtime/manager.ts';
import { objectReconciler, type Settled } from '../runtime/reconciler.ts';
import type { Store } from '../runtime/store.ts';
import { LoginAccounts } from './accounts.ts';
import { ConnectorMisconfigured, ProviderLoginFailed, RefreshRevoked } from './code-flow.ts';
import { type ExternalIdentity, LoginRefused } from './identity.ts';
import { keyIdentity, userNameFor } from './outcome.ts';
import type { ProviderAddresses } from './providers.ts';
import { ConnectorRegistry } from './registry.ts';
import { PASSWORD_CONNECTOR } from './service.ts';

/**
 * Identity refresh (`spec.identityRefresh`): a Login key signed in through a provider that can be
 * asked again keeps its `identity` current. Every `intervalMs` after its last refresh, the
 * connector is asked with what it kept in `connectorData` (a refresh token, a provider token; the
 * cluster manager asks with the platform's own key): the answer goes through the same mapping and
 * group rules as a sign-in, the User's groups and team memberships follow it (`accounts.ts`, the
 * User is never made again), and the key's identity, connectorData (a rotated refresh token) and
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

export const IDENTITY_REFRESHED_CONDITION = 'IdentityRefreshed';
/** How long an identity stays as the provider last stated it, by default. */
export const DEFAULT_IDENTITY_REFRESH_INTERVAL_MS = 10 * 60_000;
const MAX_WRITE_ATTEMPTS = 5;

export type RefreshSchedule =
  | { readonly action: 'skip' }
  | { readonly action: 'wait'; readonly inMs: number }
  | { readonly action: 'refresh' };

/** Whether and when a key's identity is refreshed (pure). */
export function refreshSchedule(key: OwnedAccessKey, intervalMs: number, now: number): RefreshSchedule {
  const connector = key.spec.identity?.connector;
  if (
    key.spec.type !== 'Login' ||
    !connector ||
    connector === PASSWORD_CONNECTOR ||
    !key.spec.user ||
    key.spec.disabled === true ||
    key.metadata.deletionTimestamp
  )
    return { action: 'skip' };
  const last = Date.parse(key.spec.identityRefresh ?? key.metadata.creationTimestamp ?? '');
  if (Number.isNaN(last)) return { action: 'refresh' };
  const inMs = last + intervalMs - now;
  return inMs > 0 ? { action: 'wait', inMs } : { action: 'refresh' };
}

/**
 * Whether a refresh failure ends the key: the provider refused the grant or the person, or the
 * platform refuses who the provider now says the person is. Unreachable providers, unreadable
 * configuration and failed provider calls are transient.
 */
export function endsTheKey(err: unknown): err is LoginRefused {
  if (err instanceof RefreshRevoked) return true;
  return (
    err instanceof LoginRefused &&
    !(err instanceof ProviderLoginFailed || err instanceof ConnectorMisconfigured)
  );
}

/** The identity refreshed under another username belongs to another User: not this key's. */
export class RenamedAtProvider extends LoginRefused {
  override readonly name = 'RenamedAtProvider';
  constructor() {
    super('the identity provider now gives this person another username; sign in again');
  }
}

export interface IdentityRefreshDeps extends ReconcilerDeps {
  readonly keys: Store<Stored<OwnedAccessKey>>;
  readonly config: () => ConfigStatus;
  readonly connectors: ConnectorRegistry;
  readonly intervalMs: number;
}

/** A refresh that may work when tried again (an unreachable provider, a failed write): retried. */
export class RefreshFailed extends RuntimeError {}

/**
 * The failure a refresh that failed for `err` is retried with (pure). Its message, which the
 * condition and the Warning Event carry, names only the class of `err`: a provider's answer may
 * hold anything, and stays in the log (the cause).
 */
export function refreshFailed(err: unknown): RefreshFailed {
  return new RefreshFailed(`the identity could not be refreshed (${errorReason(err)}); it is tried again`, {
    cause: err,
  });
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
  const accounts = new LoginAccounts(deps.api, deps.config);

  /** The key as the apiserver has it now (the cache may not show our own last write yet). */
  async function readKey(name: string): Promise<Stored<OwnedAccessKey> | undefined> {
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
  async function setRefreshed(key: Stored<OwnedAccessKey>, condition: Omit<ConditionInput, 'type'>) {
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
      current = await readKey(name);
    }
    if (current)
      throw new KeyKeptChanging(`the key kept changing while ${IDENTITY_REFRESHED_CONDITION} was written`);
  }

  async function patchSpec(name: string, spec: Record<string, unknown>) {
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
  async function writeIdentity(read: Stored<OwnedAccessKey>, fresh: ExternalIdentity) {
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
              identity: keyIdentity(fresh),
              ...(stillOurs ? { identityRefresh: new Date(deps.clock.now()).toISOString() } : {}),
            },
          },
        });
        return;
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
      current = await readKey(name);
    }
    if (current) throw new KeyKeptChanging('the key kept changing while its identity was written');
  }

  async function refreshed(key: Stored<OwnedAccessKey>, fresh: ExternalIdentity) {
    await writeIdentity(key, fresh);
    const latest = await readKey(key.metadata.name ?? '');
    if (!latest) return;
    await setRefreshed(latest, {
      status: 'True',
      reason: 'Refreshed',
      message: 'the identity is as the identity provider last stated it',
    });
  }

  async function ended(key: Stored<OwnedAccessKey>, err: LoginRefused) {
    // The condition first: the access-key controller reacts to the spec change and rewrites the
    // conditions from the object it then sees, which must already hold this one; and once the key
    // is disabled it is no longer refreshed, so a condition left for later would never come.
    await setRefreshed(key, {
      status: 'False',
      reason: 'RefreshRevoked',
      message: `${err.message}; the key is disabled`,
    });
    await patchSpec(key.metadata.name ?? '', { disabled: true });
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
  async function refresh(key: Stored<OwnedAccessKey>): Promise<Settled | undefined> {
    const identity = key.spec.identity ?? {};
    const method = deps.connectors.method(deps.config().auth, identity.connector ?? '');
    if (!method) {
      await setRefreshed(key, {
        status: 'False',
        reason: 'ConnectorRemoved',
        message: `the sign-in method "${identity.connector}" is no longer configured; the identity is no longer refreshed`,
      });
      return undefined;
    }
    const connector = deps.connectors.connectorFor(method);
    if (!connector.refresh) return undefined;
    try {
      const fresh = await connector.refresh(identity);
      if (userNameFor(fresh.username) !== key.spec.user) throw new RenamedAtProvider();
      await accounts.applyIdentity(fresh, { createUser: false });
      await refreshed(key, fresh);
      return { requeueAfter: deps.intervalMs };
    } catch (err) {
      if (!endsTheKey(err)) throw err;
      await ended(key, err);
      return undefined;
    }
  }

  return objectReconciler<Stored<OwnedAccessKey>, never>({
    kind: 'OwnedAccessKey',
    resource: resources.ownedAccessKeys,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.keys,
    action: 'RefreshIdentity',
    status: false,
    async apply(cached, ctx) {
      const due = refreshSchedule(cached, deps.intervalMs, deps.clock.now());
      if (due.action === 'skip') return undefined;
      if (due.action === 'wait') return { requeueAfter: due.inMs };
      // Due by the cache: decided again on the key itself, whose grant is the one to use (a grant
      // used twice is refused by providers that rotate refresh tokens).
      const key = await readKey(cached.metadata.name ?? '');
      if (!key) return undefined;
      const schedule = refreshSchedule(key, deps.intervalMs, deps.clock.now());
      if (schedule.action === 'skip') return undefined;
      if (schedule.action === 'wait') return { requeueAfter: schedule.inMs };
      try {
        return await refresh(key);
      } catch (err) {
        // Deleted meanwhile: nothing left to refresh.
        if (isNotFound(err)) return undefined;
        const failed = refreshFailed(err);
        try {
          await setRefreshed(key, { status: 'False', reason: errorReason(failed), message: failed.message });
        } catch (writeErr) {
          ctx.logger.warn(
            { err: writeErr, reason: errorReason(writeErr) },
            `writing ${IDENTITY_REFRESHED_CONDITION} after a failed refresh failed`,
          );
        }
        throw failed;
      }
    },
  });
}

export interface IdentityRefreshOptions {
  readonly intervalMs?: number;
  /** The providers' addresses (tests point them at local servers). */
  readonly addresses?: ProviderAddresses;
}

/**
 * The identity refresh controller (leader only, like every controller): primary OwnedAccessKeys;
 * each key is requeued at its next refresh, and a configuration change looks at every key again
 * (a connector added back, or changed).
 */
export function setupIdentityRefreshController(
  manager: Manager,
  deps: ControllerDeps,
  options: IdentityRefreshOptions = {},
) {
  const keys = manager.informer<Stored<OwnedAccessKey>>(resources.ownedAccessKeys);
  const platformConfig = platformConfigSource(manager, deps.platformNamespace ?? DEFAULT_PLATFORM_NAMESPACE);
  const reconcile = identityRefreshReconciler({
    ...reconcilerDeps(deps),
    keys: keys.store,
    config: () => platformConfig.current(),
    connectors: new ConnectorRegistry({ addresses: options.addresses }),
    intervalMs: options.intervalMs ?? DEFAULT_IDENTITY_REFRESH_INTERVAL_MS,
  });
  const controller = addController(manager, deps, { name: 'identityrefresh', workers: 2, reconcile });
  controller.watchPrimary(keys).watch(platformConfig.informer, () => keys.store.keys());
  return { controller };
}
