import type { V1RoleBinding, V1ServiceAccount } from '@kubernetes/client-node';
import type { Logger } from 'pino';
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
import { applyObject } from '../../runtime/apply.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ReconcileContext, Reconciler } from '../../runtime/controller.ts';
import { isApiError, isNotFound } from '../../runtime/errors.ts';
import type { EventRecorder } from '../../runtime/events.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import {
  type KubeApi,
  type KubeClient,
  objectKey,
  objectPath,
  type ResourceRef,
} from '../../runtime/kube-client.ts';
import type { Manager } from '../../runtime/manager.ts';
import { type Converged, objectReconciler } from '../../runtime/reconciler.ts';
import type { Store } from '../../runtime/store.ts';
import { type SyncConfigValidation, validateSyncConfig } from '../../sync/config.ts';
import {
  hostNamespacesOf,
  type Syncer,
  type SyncerOptions,
  startSyncer,
  syncedKinds,
} from '../../sync/controllers/syncer.ts';
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
  type SyncerState,
  stalledOutcome,
  stallOf,
  syncerFingerprint,
} from './desired.ts';
import {
  desiredSyncerIdentity,
  instanceKeyOf,
  roleBindingMatches,
  type SyncerIdentity,
  serviceAccountMatches,
  syncerServiceAccountName,
} from './identity.ts';
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

/** Index of the syncer identity objects (ServiceAccounts, RoleBindings) by the instance uid label. */
export const BY_INSTANCE_UID = 'virtualclusterinstance-uid';

interface Running {
  fingerprint: string;
  syncer: Syncer;
  /** The virtual cluster's client (also the reachability probe's). */
  client: KubeClient;
  /** The host client acting as the syncer's own ServiceAccount. */
  hostClient: KubeClient;
}

export interface SyncerFactoryInput {
  key: string;
  virtual: KubeApi;
  /** The host, as the syncer's own ServiceAccount (never the controller's identity). */
  host: KubeApi;
  hostNamespace: string;
  vclusterName: string;
  config: SyncerOptions['config'];
  logger: Logger;
  onStatusChange: () => void;
}

/**
 * The syncers this operator replica runs, one per VirtualClusterInstance key. Start, restart and
 * stop happen only inside that key's reconcile (the work queue never runs one key twice at once),
 * or in `stopAll` once the controller stopped.
 */
export class SyncerSupervisor {
  private readonly running = new Map<string, Running>();

  constructor(private readonly create: (input: SyncerFactoryInput) => Syncer) {}

  get(key: string): Running | undefined {
    return this.running.get(key);
  }

  keys(): string[] {
    return [...this.running.keys()];
  }

  start(
    input: Omit<SyncerFactoryInput, 'virtual' | 'host'> & {
      fingerprint: string;
      client: KubeClient;
      hostClient: KubeClient;
    },
  ): Running {
    const syncer = this.create({ ...input, virtual: input.client, host: input.hostClient });
    const entry = {
      fingerprint: input.fingerprint,
      syncer,
      client: input.client,
      hostClient: input.hostClient,
    };
    this.running.set(input.key, entry);
    return entry;
  }

  async stop(key: string): Promise<void> {
    const entry = this.running.get(key);
    if (!entry) return;
    this.running.delete(key);
    await entry.syncer.stop();
    entry.client.close();
    entry.hostClient.close();
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.keys().map((key) => this.stop(key)));
  }
}

export interface VirtualClusterReconcilerDeps {
  /** The host cluster, as the controller (instances' status and finalizer, syncer identities, tokens). */
  api: KubeApi;
  clock: Clock;
  events: EventRecorder;
  instances: Store<Stored<VirtualClusterInstance>>;
  /** The syncers' ServiceAccounts and RoleBindings (labelled with the instance uid, indexed by {@link BY_INSTANCE_UID}). */
  serviceAccounts: Store<V1ServiceAccount>;
  roleBindings: Store<V1RoleBinding>;
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

/** The default syncer factory: the syncers run on the operator's manager, each with its own host client. */
export function syncerFactory(options: { manager: Manager }): (input: SyncerFactoryInput) => Syncer {
  return (input) =>
    startSyncer({
      manager: options.manager,
      virtual: input.virtual,
      host: input.host,
      hostNamespace: input.hostNamespace,
      name: input.vclusterName,
      config: input.config,
      logger: input.logger,
      controllerPrefix: `syncer:${input.key}:`,
      onStatusChange: input.onStatusChange,
    });
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
  const { api, instances, supervisor } = deps;
  /** Since when each starting syncer waits for its permissions (by instance key). */
  const permissionWaits = new Map<string, number>();

  /**
   * Where an instance that asks to be synced with a valid configuration may not sync, from the
   * caches (pure): outside its project (admission refuses that; this covers instances admitted
   * before, or whose namespaces changed project since), or under a placement another instance holds.
   */
  const placementRefusals = (
    vci: Stored<VirtualClusterInstance>,
    validated: SyncConfigValidation | undefined,
  ): PlacementProblem[] =>
    asksToBeSynced(vci) && validated?.config
      ? [
          ...placementProblems(vci, validated.config, deps.projectOf),
          ...placementClaims(vci, deps.instancesPlacedIn(placementOf(vci).hostNamespace)),
        ]
      : [];

  /** The syncer identity objects the caches hold for an instance, in any namespace. */
  const currentIdentity = (vci: Stored<VirtualClusterInstance>) => ({
    serviceAccounts: deps.serviceAccounts.byIndex(BY_INSTANCE_UID, vci.metadata.uid ?? ''),
    roleBindings: deps.roleBindings.byIndex(BY_INSTANCE_UID, vci.metadata.uid ?? ''),
  });

  /** The syncer identity objects the caches hold for an instance key (the instance gone). */
  const identityLeftBy = (key: string) => {
    const ofKey = (obj: V1ServiceAccount | V1RoleBinding) => instanceKeyOf(obj).includes(key);
    return {
      serviceAccounts: deps.serviceAccounts.list().filter(ofKey),
      roleBindings: deps.roleBindings.list().filter(ofKey),
    };
  };

  /** Applies what differs from the caches, removes what is no longer wanted (other kinds, other namespaces). */
  async function ensureIdentity(vci: Stored<VirtualClusterInstance>, desired: SyncerIdentity): Promise<void> {
    const current = currentIdentity(vci);
    const at = (obj: { metadata?: { namespace?: string; name?: string } }) =>
      `${obj.metadata?.namespace}/${obj.metadata?.name}`;
    const apply = (obj: V1ServiceAccount | V1RoleBinding, resource: ResourceRef) =>
      applyObject(api, obj, { fieldManager: fieldManagers.virtualCluster, force: true, resource });
    const cachedAccount = current.serviceAccounts.find((sa) => at(sa) === at(desired.serviceAccount));
    if (!serviceAccountMatches(cachedAccount, desired.serviceAccount))
      await apply(desired.serviceAccount, resources.serviceAccounts);
    const cachedBindings = new Map(current.roleBindings.map((binding) => [at(binding), binding]));
    await Promise.all(
      desired.roleBindings
        .filter((binding) => !roleBindingMatches(cachedBindings.get(at(binding)), binding))
        .map((binding) => apply(binding, resources.roleBindings)),
    );
    const wanted = new Set([desired.serviceAccount, ...desired.roleBindings].map(at));
    await deleteIdentityObjects({
      serviceAccounts: current.serviceAccounts.filter((sa) => !wanted.has(at(sa))),
      roleBindings: current.roleBindings.filter((binding) => !wanted.has(at(binding))),
    });
  }

  async function deleteIdentityObjects(objects: ReturnType<typeof currentIdentity>): Promise<void> {
    const remove = async (resource: ResourceRef, obj: V1ServiceAccount | V1RoleBinding) => {
      try {
        await api.request({
          method: 'DELETE',
          path: objectPath(resource, obj.metadata?.namespace, obj.metadata?.name ?? ''),
          body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: obj.metadata?.uid } },
        });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    };
    await Promise.all([
      ...objects.roleBindings.map((binding) => remove(resources.roleBindings, binding)),
      ...objects.serviceAccounts.map((sa) => remove(resources.serviceAccounts, sa)),
    ]);
  }

  /** No syncer and no identity any more (the scaffold then removes the finalizer). */
  async function release(key: string, vci: Stored<VirtualClusterInstance> | undefined): Promise<void> {
    permissionWaits.delete(key);
    await supervisor.stop(key);
    await deleteIdentityObjects(vci ? currentIdentity(vci) : identityLeftBy(key));
  }

  async function converge(
    vci: Stored<VirtualClusterInstance>,
    ctx: ReconcileContext,
  ): Promise<Converged<VirtualClusterInstanceStatus>> {
    const key = objectKey(vci);
    const { spec } = vci;
    const namespace = vci.metadata.namespace ?? '';
    const validated = validatedConfig(vci);
    // What only a change of the instance (or of what its placement was refused for) resolves:
    // no syncer, no identity, Stalled.
    const stall = stallOf(vci, validated, placementRefusals(vci, validated));
    if (stall) {
      await release(key, vci);
      return stalledOutcome(stall);
    }
    // Set: an instance without it stalled above.
    const secretName = spec.credentialsSecretRef?.name ?? '';
    let connection: Connection | undefined;
    let access: ClusterAccess;
    try {
      connection = connectionFor(spec, secretName, await readCredentialsSecret(api, namespace, secretName));
      access = { phase: 'probed', reachability: { reachable: true, username: '' } };
    } catch (err) {
      // The Secret is not watched: it is read again on the next retry.
      if (!(err instanceof CredentialsMissing || err instanceof InvalidCredentials)) throw err;
      access = { phase: 'noCredentials', reason: err.name, message: err.message };
    }
    // The syncer's side: what it would be started from, and whether the running one still fits.
    const { hostNamespace, vclusterName } = placementOf(vci);
    const configured = asksToBeSynced(vci);
    const syncConfig = configured ? (validated?.config ?? null) : null;
    const fingerprint =
      connection && spec.config !== undefined
        ? syncerFingerprint({ connection, config: spec.config, hostNamespace, vclusterName })
        : undefined;
    let running = supervisor.get(key);
    if (running && (fingerprint === undefined || running.fingerprint !== fingerprint || !syncConfig)) {
      await supervisor.stop(key);
      running = undefined;
    }
    // The syncer's identity exists exactly while its syncer may run.
    let identityProblem: { reason: string; message: string } | undefined;
    if (syncConfig) {
      try {
        const namespaces = hostNamespacesOf({ vclusterName, hostNamespace, config: syncConfig }) ?? [];
        await ensureIdentity(
          vci,
          desiredSyncerIdentity(vci, hostNamespace, syncedKinds(syncConfig), namespaces),
        );
      } catch (err) {
        // The host refused (RBAC, a namespace being deleted): reported, retried on the next recheck.
        if (!isApiError(err)) throw err;
        identityProblem = {
          reason: 'SyncerIdentityFailed',
          message: `could not set up the syncer's ServiceAccount in namespace ${hostNamespace}: the apiserver answered ${err.code}`,
        };
      }
    } else {
      await release(key, vci);
    }
    // Reachability, with the running syncer's client when there is one.
    let probeClient: KubeClient | undefined;
    try {
      if (connection) {
        // The syncer started below writes to the virtual cluster through this client.
        probeClient = running?.client ?? clientForConnection(connection, fieldManagers.syncer);
        access = {
          phase: 'probed',
          reachability: await probeCluster(probeClient, connection.server, deps.probeTimeoutMs),
        };
      }
      let state: SyncerState;
      if (!syncConfig) state = { phase: 'notConfigured' };
      else if (access.phase === 'noCredentials')
        state = { phase: 'noConnection', reason: access.reason, message: access.message };
      else if (!access.reachability.reachable)
        state = {
          phase: 'noConnection',
          reason: 'Unreachable',
          message: access.reachability.message,
        };
      else if (identityProblem) state = { phase: 'blocked', ...identityProblem };
      else {
        let waitingForPermissions = false;
        if (!running && connection && probeClient && fingerprint) {
          const tokens = new ServiceAccountTokens({
            api,
            namespace: hostNamespace,
            serviceAccount: syncerServiceAccountName(vci),
            clock: deps.clock,
          });
          const hostClient = deps.hostClientFor(tokens);
          // New RoleBindings take a moment to reach the apiserver's authorizer: the syncer starts
          // once its own identity may list what it syncs, rather than backing off on 403s; past a
          // grace period it starts anyway, and what it may not do shows in its errors.
          const waitingSince = permissionWaits.get(key) ?? deps.clock.now();
          const graceOver = deps.clock.now() - waitingSince >= PERMISSIONS_GRACE_MS;
          let allowed = graceOver;
          try {
            allowed ||= await mayListSyncedKinds(hostClient, hostNamespace, syncedKinds(syncConfig));
          } finally {
            if (!allowed) hostClient.close();
          }
          if (allowed) {
            permissionWaits.delete(key);
            ctx.logger.info({ hostNamespace, vclusterName }, 'starting the syncer');
            running = supervisor.start({
              key,
              fingerprint,
              client: probeClient,
              hostClient,
              hostNamespace,
              vclusterName,
              config: syncConfig,
              logger: ctx.logger.child({ vcluster: `${hostNamespace}/${vclusterName}` }),
              onStatusChange: () => deps.enqueue(key),
            });
          } else {
            permissionWaits.set(key, waitingSince);
            waitingForPermissions = true;
          }
        }
        state = running
          ? { phase: 'running', status: running.syncer.status() }
          : waitingForPermissions
            ? { phase: 'starting', message: "waiting for the syncer's ServiceAccount to get its permissions" }
            : { phase: 'notConfigured' };
      }
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

  return objectReconciler<Stored<VirtualClusterInstance>, VirtualClusterInstanceStatus>({
    kind: 'VirtualClusterInstance',
    resource: resources.virtualClusterInstances,
    api,
    clock: deps.clock,
    events: deps.events,
    store: instances,
    // Guards the syncer's host identity, which has no owner reference (it may live in another
    // namespace of the project): an instance has it while it asks to be synced.
    finalizer: CLEANUP_FINALIZER,
    needsFinalizer: asksToBeSynced,
    action: 'SyncVirtualCluster',
    // A refused placement depends on other objects too (namespaces' projects, the instance that
    // holds the placement): a stalled instance is looked at again when what they say changes.
    stalledOn: (vci) => JSON.stringify(placementRefusals(vci, validatedConfig(vci))),
    apply: converge,
    cleanup: release,
  });
}
