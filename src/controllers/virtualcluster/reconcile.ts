import { CLEANUP_FINALIZER } from '../../api/labels.ts';
import { resources, type Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import {
  type ClusterAccess,
  clientForConnection,
  RECHECK_MS,
  RETRY_CONNECTION_MS,
  readCredentialsSecret,
} from '../../clusters/access.ts';
import {
  type Connection,
  CredentialsMissing,
  connectionFor,
  InvalidCredentials,
} from '../../clusters/connection.ts';
import { probeCluster } from '../../clusters/reachability.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ReconcileContext, Reconciler } from '../../runtime/controller.ts';
import { isApiError } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { type KubeClient, objectKey } from '../../runtime/kube-client.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { type SyncConfig, type SyncConfigValidation, validateSyncConfig } from '../../sync/config.ts';
import { syncedKinds } from '../../sync/controllers/syncer.ts';
import { hostNamespacesOf } from '../../sync/controllers/syncer-caches.ts';
import {
  type PlacementProblem,
  placementClaims,
  placementOf,
  placementProblems,
} from '../../sync/placement.ts';
import type { SyncedKind } from '../../sync/translate.ts';
import {
  asksToBeSynced,
  instanceOutcome,
  SYNCING_CONDITION,
  type SyncerState,
  stalledOutcome,
  stallOf,
  syncerFingerprint,
} from './desired.ts';
import { desiredSyncerIdentity, syncerServiceAccountName } from './identity.ts';
import type { Running, SyncerSupervisor } from './supervisor.ts';
import {
  currentIdentity,
  deleteIdentityObjects,
  ensureIdentity,
  identityLeftBy,
  type SyncerIdentityStores,
} from './syncer-identity.ts';
import { ServiceAccountTokens } from './token.ts';

/** How soon to look again while a new syncer identity's permissions reach the authorizer. */
const PERMISSIONS_RETRY_MS = 500;
/** How long a syncer waits for them before it starts anyway. */
const PERMISSIONS_GRACE_MS = 10_000;

/** Whether `client`'s identity may list each kind in `namespace` (SelfSubjectAccessReviews). */
async function mayListSyncedKinds(
  client: KubeApi,
  namespace: string,
  kinds: readonly SyncedKind[],
): Promise<boolean> {
  const answers = await Promise.all(
    kinds.map((kind) =>
      client.request<{ status?: { allowed?: boolean } }>({
        method: 'POST',
        path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        body: {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace, verb: 'list', resource: SYNCED_PLURALS[kind] } },
        },
      }),
    ),
  );
  return answers.every((answer) => answer.status?.allowed === true);
}

const SYNCED_PLURALS: Readonly<Record<SyncedKind, string>> = {
  Service: 'services',
  Endpoints: 'endpoints',
  Secret: 'secrets',
  ConfigMap: 'configmaps',
};

/** The instance's `spec.config`, validated (undefined: none). */
export const validatedConfig = (
  vci: Pick<VirtualClusterInstance, 'spec'>,
): SyncConfigValidation | undefined =>
  vci.spec.config === undefined ? undefined : validateSyncConfig(vci.spec.config);

export interface VirtualClusterReconcilerDeps extends SyncerIdentityStores {
  /** `api`: the host cluster, as the controller (instances' status and finalizer, syncer identities, tokens). */
  clock: Clock;
  events: EventRecorder;
  instances: Store<Stored<VirtualClusterInstance>>;
  /** The instances whose host namespace is `namespace` (from the instances' cache). */
  instancesPlacedIn: (namespace: string) => readonly Stored<VirtualClusterInstance>[];
  /** The project label of a namespace, if it exists and has one (from a Namespace cache). */
  projectOf: (namespace: string) => string | undefined;
  /** A host client that presents the given tokens (the syncer's ServiceAccount's) and nothing else. */
  hostClientFor: (tokens: ServiceAccountTokens) => KubeClient;
  supervisor: SyncerSupervisor;
  /** Enqueues a key of this controller (a syncer's status changed). */
  enqueue: (key: string) => void;
  /** How long the reachability probe of a virtual cluster may take. */
  probeTimeoutMs?: number;
}

/**
 * Reports whether the platform reaches each VirtualClusterInstance (`Ready`: a SelfSubjectReview
 * with the credentials of `spec.credentialsSecretRef`, repeated every minute, every 10 s while it
 * fails) and runs one syncer per instance that has `spec.credentialsSecretRef` and
 * `spec.config`, restarts it when anything it was started from changes (configuration,
 * credentials, endpoint, placement), stops it when the instance goes, and reports how it does in
 * the `Syncing` condition. Credentials are read with a GET on every reconcile (no cache of all
 * Secrets) and never logged; only a digest of them is kept.
 *
 * The syncer acts on the host as the virtual cluster, never as the platform: each configured
 * instance gets a ServiceAccount of its own in its host namespace, bound there to the ClusterRoles
 * of exactly the kinds it syncs (`desiredSyncerIdentity`), and its syncer's host client presents
 * short-lived tokens of that ServiceAccount (TokenRequest, renewed before they expire). The
 * identity is removed when the instance goes (guarded by the finalizer, which an instance has
 * while it asks to be synced) or when its syncer may not run.
 *
 * On the reconcile scaffold: `Reconciling` is True while the syncer starts (`Ready` Unknown) and,
 * `ProgressingWithRetry`, while the instance is not Ready and is looked at again (unreachable,
 * credentials refused or their Secret missing, sync errors). What only a change of the instance
 * resolves is `Stalled` (`stallOf`: no `spec.credentialsSecretRef`, an invalid `spec.config`, a
 * placement refused), not retried: an instance whose placement was refused is looked at again
 * when the namespaces it names change project or the instance that holds its placement changes
 * (`stalledOn`, and the watches of the setup).
 */
export function virtualClusterReconciler(deps: VirtualClusterReconcilerDeps): Reconciler {
  const context: VirtualClusterContext = { ...deps, permissionWaits: new Map() };
  return objectReconciler<Stored<VirtualClusterInstance>, VirtualClusterInstanceStatus>({
    kind: 'VirtualClusterInstance',
    resource: resources.virtualClusterInstances,
    api: deps.api,
    clock: deps.clock,
    events: deps.events,
    store: deps.instances,
    // Guards the syncer's host identity, which has no owner reference (it may live in another
    // namespace of the project): an instance has it while it asks to be synced.
    finalizer: CLEANUP_FINALIZER,
    needsFinalizer: asksToBeSynced,
    action: 'SyncVirtualCluster',
    // A refused placement depends on other objects too (namespaces' projects, the instance that
    // holds the placement): a stalled instance is looked at again when what they say changes.
    stalledOn: (vci) => JSON.stringify(placementRefusals(deps, vci, validatedConfig(vci))),
    apply: (vci, ctx) => reconcileVirtualCluster(context, vci, ctx),
    cleanup: (key, vci) => releaseInstance(context, key, vci),
  });
}

/** What reconciles of instances work with: the deps, and since when each starting syncer waits for its permissions (by key). */
interface VirtualClusterContext extends VirtualClusterReconcilerDeps {
  permissionWaits: Map<string, number>;
}

/**
 * Converges one instance: stalled (no syncer, no identity) when only a change of it resolves
 * what it asks for; else its syncer's identity, its reachability and its syncer (started,
 * restarted when what it was started from changed, stopped when it may not run).
 */
async function reconcileVirtualCluster(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const { supervisor } = context;
  const key = objectKey(vci);
  if (isProvisioned(vci)) {
    // Not a registered instance missing its credentials: nothing of a syncer or identity is due
    // until a provisioner makes its control plane and credentials.
    await releaseInstance(context, key, vci);
    return provisionerNotConfigured();
  }
  const validated = validatedConfig(vci);
  // What only a change of the instance (or of what its placement was refused for) resolves:
  // no syncer, no identity, Stalled.
  const stall = stallOf(vci, validated, placementRefusals(context, vci, validated));
  if (stall) {
    await releaseInstance(context, key, vci);
    return stalledOutcome(stall);
  }
  const { connection, access: credentialsAccess } = await connectionOf(context.api, vci);
  let access = credentialsAccess;
  // The syncer's side: what it would be started from, and whether the running one still fits.
  const { hostNamespace, vclusterName } = placementOf(vci);
  const syncConfig = asksToBeSynced(vci) ? (validated?.config ?? null) : null;
  const fingerprint =
    connection && vci.spec.config !== undefined
      ? syncerFingerprint({ connection, config: vci.spec.config, hostNamespace, vclusterName })
      : undefined;
  let running = supervisor.get(key);
  if (running && (fingerprint === undefined || running.fingerprint !== fingerprint || !syncConfig)) {
    await supervisor.stop(key);
    running = undefined;
  }
  const identityProblem = await convergeIdentity(context, key, vci, syncConfig);
  // Reachability, with the running syncer's client when there is one.
  let probeClient: KubeClient | undefined;
  try {
    if (connection) {
      // The syncer started below writes to the virtual cluster through this client.
      probeClient = running?.client ?? clientForConnection(connection, fieldManagers.syncer);
      access = {
        phase: 'probed',
        reachability: await probeCluster(probeClient, connection.server, context.probeTimeoutMs),
      };
    }
    const state = await syncerState(
      context,
      { key, vci, access, identityProblem, syncConfig, running, connection, probeClient, fingerprint },
      ctx,
    );
    const reachable = access.phase === 'probed' && access.reachability.reachable;
    const requeueAfter =
      state.phase === 'starting'
        ? PERMISSIONS_RETRY_MS
        : reachable && !identityProblem
          ? RECHECK_MS
          : RETRY_CONNECTION_MS;
    return instanceOutcome(access, state, requeueAfter);
  } finally {
    // A probe client the syncer did not take over is closed.
    if (probeClient && probeClient !== supervisor.get(key)?.client) probeClient.close();
  }
}

/** An instance the platform provisions (from `spec.templateRef`) rather than one it registers (`spec.endpoint`). */
export const isProvisioned = (vci: Pick<VirtualClusterInstance, 'spec'>): boolean =>
  vci.spec.endpoint === undefined;

/** The reason of `Provisioned` and `Ready` while no provisioner runs. */
const PROVISIONER_NOT_CONFIGURED = 'ProvisionerNotConfigured';

/**
 * The outcome of a provisioned instance while this operator provisions none (pure): `Provisioned`
 * and `Ready` False with reason `ProvisionerNotConfigured`, no `Syncing`. Not `Stalled`: the
 * instance asks for nothing wrong; an operator that provisions will take it up.
 */
export function provisionerNotConfigured(): Converged<VirtualClusterInstanceStatus> {
  const message =
    'this instance names a VirtualClusterTemplate (spec.templateRef), but this operator provisions no virtual clusters';
  return {
    ready: { status: 'False', reason: PROVISIONER_NOT_CONFIGURED, message },
    conditions: [{ type: 'Provisioned', status: 'False', reason: PROVISIONER_NOT_CONFIGURED, message }],
    removeConditions: [SYNCING_CONDITION],
  };
}

/**
 * Where an instance that asks to be synced with a valid configuration may not sync, from the
 * caches (pure): outside its project (admission refuses that; this covers instances admitted
 * before, or whose namespaces changed project since), or under a placement another instance holds.
 */
function placementRefusals(
  deps: Pick<VirtualClusterReconcilerDeps, 'projectOf' | 'instancesPlacedIn'>,
  vci: Stored<VirtualClusterInstance>,
  validated: SyncConfigValidation | undefined,
): PlacementProblem[] {
  return asksToBeSynced(vci) && validated?.config
    ? [
        ...placementProblems(vci, validated.config, deps.projectOf),
        ...placementClaims(vci, deps.instancesPlacedIn(placementOf(vci).hostNamespace)),
      ]
    : [];
}

/** No syncer and no identity any more (the scaffold then removes the finalizer). */
async function releaseInstance(
  context: VirtualClusterContext,
  key: string,
  vci: Stored<VirtualClusterInstance> | undefined,
): Promise<void> {
  context.permissionWaits.delete(key);
  await context.supervisor.stop(key);
  await deleteIdentityObjects(
    context.api,
    vci ? currentIdentity(context, vci) : identityLeftBy(context, key),
  );
}

/**
 * The connection `spec.credentialsSecretRef` (set: an instance without it is stalled) gives, or
 * why there is none. The Secret is not watched: it is read again on every reconcile.
 */
async function connectionOf(
  api: KubeApi,
  vci: Stored<VirtualClusterInstance>,
): Promise<{ connection?: Connection; access: ClusterAccess }> {
  const secretName = vci.spec.credentialsSecretRef?.name ?? '';
  try {
    const secret = await readCredentialsSecret(api, vci.metadata.namespace ?? '', secretName);
    return {
      connection: connectionFor(vci.spec, secretName, secret),
      access: { phase: 'probed', reachability: { reachable: true, username: '' } },
    };
  } catch (err) {
    if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
    return { access: { phase: 'noCredentials', reason: err.name, message: err.message } };
  }
}

/**
 * The syncer's identity exists exactly while its syncer may run (`syncConfig`). Returns why the
 * host refused it (RBAC, a namespace being deleted): reported, retried on the next recheck.
 */
async function convergeIdentity(
  context: VirtualClusterContext,
  key: string,
  vci: Stored<VirtualClusterInstance>,
  syncConfig: SyncConfig | null,
): Promise<{ reason: string; message: string } | undefined> {
  if (!syncConfig) {
    await releaseInstance(context, key, vci);
    return undefined;
  }
  const { hostNamespace, vclusterName } = placementOf(vci);
  try {
    const namespaces = hostNamespacesOf({ vclusterName, hostNamespace, config: syncConfig }) ?? [];
    await ensureIdentity(
      context,
      vci,
      desiredSyncerIdentity(vci, hostNamespace, syncedKinds(syncConfig), namespaces),
    );
    return undefined;
  } catch (err) {
    if (!isApiError(err)) throw err;
    return {
      reason: 'SyncerIdentityFailed',
      message: `could not set up the syncer's ServiceAccount in namespace ${hostNamespace}: the apiserver answered ${err.code}`,
    };
  }
}

/** What {@link syncerState} decides from. */
interface SyncerInput {
  key: string;
  vci: Stored<VirtualClusterInstance>;
  access: ClusterAccess;
  identityProblem: { reason: string; message: string } | undefined;
  syncConfig: SyncConfig | null;
  /** The syncer running for the instance, if it still fits. */
  running: Running | undefined;
  connection: Connection | undefined;
  probeClient: KubeClient | undefined;
  fingerprint: string | undefined;
}

/** How the instance's syncer does, starting it when it may run and does not yet. */
async function syncerState(
  context: VirtualClusterContext,
  input: SyncerInput,
  ctx: ReconcileContext,
): Promise<SyncerState> {
  const { access, identityProblem, syncConfig } = input;
  if (!syncConfig) return { phase: 'notConfigured' };
  if (access.phase === 'noCredentials')
    return { phase: 'noConnection', reason: access.reason, message: access.message };
  if (!access.reachability.reachable)
    return { phase: 'noConnection', reason: 'Unreachable', message: access.reachability.message };
  if (identityProblem) return { phase: 'blocked', ...identityProblem };
  const { connection, probeClient, fingerprint } = input;
  let running = input.running;
  if (!running && connection && probeClient && fingerprint) {
    running = await startWhenPermitted(context, { ...input, syncConfig, probeClient, fingerprint }, ctx);
    if (!running)
      return { phase: 'starting', message: "waiting for the syncer's ServiceAccount to get its permissions" };
  }
  return running ? { phase: 'running', status: running.syncer.status() } : { phase: 'notConfigured' };
}

/**
 * Starts the instance's syncer, acting on the host as its own ServiceAccount, once that identity
 * may list what it syncs; undefined while it waits for that. New RoleBindings take a moment to
 * reach the apiserver's authorizer: the syncer starts once they did, rather than backing off on
 * 403s; past a grace period it starts anyway, and what it may not do shows in its errors.
 */
async function startWhenPermitted(
  context: VirtualClusterContext,
  input: SyncerInput & { syncConfig: SyncConfig; probeClient: KubeClient; fingerprint: string },
  ctx: ReconcileContext,
): Promise<Running | undefined> {
  const { key, vci, syncConfig } = input;
  const { hostNamespace, vclusterName } = placementOf(vci);
  const tokens = new ServiceAccountTokens({
    api: context.api,
    namespace: hostNamespace,
    serviceAccount: syncerServiceAccountName(vci),
    clock: context.clock,
  });
  const hostClient = context.hostClientFor(tokens);
  const waitingSince = context.permissionWaits.get(key) ?? context.clock.now();
  let allowed = context.clock.now() - waitingSince >= PERMISSIONS_GRACE_MS;
  try {
    allowed ||= await mayListSyncedKinds(hostClient, hostNamespace, syncedKinds(syncConfig));
  } finally {
    if (!allowed) hostClient.close();
  }
  if (!allowed) {
    context.permissionWaits.set(key, waitingSince);
    return undefined;
  }
  context.permissionWaits.delete(key);
  ctx.logger.info({ hostNamespace, vclusterName }, 'starting the syncer');
  return context.supervisor.start({
    key,
    fingerprint: input.fingerprint,
    client: input.probeClient,
    hostClient,
    hostNamespace,
    vclusterName,
    config: syncConfig,
    logger: ctx.logger.child({ vcluster: `${hostNamespace}/${vclusterName}` }),
    onStatusChange: () => context.enqueue(key),
  });
}
