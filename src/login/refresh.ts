import { PatchStrategy } from '@kubernetes/client-node';
import type { ConfigStatus } from '../api/config.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { platformConfigSource } from '../config/platform-config.ts';
import { type ControllerDeps, DEFAULT_PLATFORM_NAMESPACE } from '../controllers/common.ts';
import { resources, type Stored } from '../controllers/resources.ts';
import { patchStatus } from '../runtime/apply.ts';
import type { Clock } from '../runtime/clock.ts';
import { type Condition, type ConditionInput, setCondition } from '../runtime/conditions.ts';
import type { ReconcileResult } from '../runtime/controller.ts';
import { isConflict, isNotFound } from '../runtime/errors.ts';
import type { EventRecorder } from '../runtime/events.ts';
import { type KubeApi, objectPath } from '../runtime/kube-client.ts';
import type { Manager } from '../runtime/manager.ts';
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
 * False `RefreshFailed`, and is asked again with backoff. A key whose connector was removed from
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

export interface IdentityRefreshDeps {
  readonly api: KubeApi;
  readonly clock: Clock;
  readonly events: EventRecorder;
  readonly keys: Store<Stored<OwnedAccessKey>>;
  readonly config: () => ConfigStatus;
  readonly connectors: ConnectorRegistry;
  readonly intervalMs: number;
}

export function identityRefreshReconciler(deps: IdentityRefreshDeps) {
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
   * on a conflict, on the key read again.
   */
  async function setRefreshed(key: Stored<OwnedAccessKey>, condition: Omit<ConditionInput, 'type'>) {
    let current: Stored<OwnedAccessKey> | undefined = key;
    for (let attempt = 0; current && attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      const conditions = setCondition(
        (current.status?.conditions ?? []) as Condition[],
        { type: IDENTITY_REFRESHED_CONDITION, ...condition },
        new Date(deps.clock.now()),
      );
      try {
        await patchStatus(
          deps.api,
          resources.ownedAccessKeys,
          current,
          { ...current.status, conditions },
          {
            unchanged: true,
          },
        );
        return;
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
      current = await readKey(key.metadata.name ?? '');
    }
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
    if (current) throw new Error('the key kept changing while its identity was written');
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
    // conditions from the object it then sees, which must already hold this one.
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

  return async function reconcile(name: string): Promise<ReconcileResult | undefined> {
    const cached = deps.keys.get(name);
    if (!cached) return undefined;
    const due = refreshSchedule(cached, deps.intervalMs, deps.clock.now());
    if (due.action === 'skip') return undefined;
    if (due.action === 'wait') return { requeueAfter: due.inMs };
    // Due by the cache: decided again on the key itself, whose grant is the one to use (a grant
    // used twice is refused by providers that rotate refresh tokens).
    const key = await readKey(name);
    if (!key) return undefined;
    const schedule = refreshSchedule(key, deps.intervalMs, deps.clock.now());
    if (schedule.action === 'skip') return undefined;
    if (schedule.action === 'wait') return { requeueAfter: schedule.inMs };
    const identity = key.spec.identity ?? {};
    const method = deps.connectors.method(deps.config().auth, identity.connector ?? '');
    try {
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
    } catch (err) {
      if (isNotFound(err)) return undefined;
      await setRefreshed(key, {
        status: 'False',
        reason: 'RefreshFailed',
        message: `the identity could not be refreshed (${err instanceof Error ? err.name : 'error'}); it is tried again`,
      }).catch(() => {});
      throw err;
    }
  };
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
  const controller = manager.controller({
    name: 'identityrefresh',
    maxConcurrentReconciles: deps.maxConcurrentReconciles ?? 2,
    reconcile: identityRefreshReconciler({
      api: deps.api,
      clock: deps.clock,
      events: deps.events,
      keys: keys.store,
      config: () => platformConfig.current(),
      connectors: new ConnectorRegistry({ addresses: options.addresses }),
      intervalMs: options.intervalMs ?? DEFAULT_IDENTITY_REFRESH_INTERVAL_MS,
    }),
  });
  controller.watchPrimary(keys).watch(platformConfig.informer, () => keys.store.keys());
  return { controller };
}
