import type { Stored } from '../../api/resources.ts';
import type {
  VirtualClusterInstance,
  VirtualClusterInstanceStatus,
} from '../../api/virtualclusterinstance.ts';
import {
  type ClusterAccess,
  clientForConnection,
  RECHECK_MS,
  RETRY_CONNECTION_MS,
} from '../../clusters/access.ts';
import type { Connection } from '../../clusters/connection.ts';
import type { Reachability } from '../../clusters/reachability.ts';
import type { ReconcileContext } from '../../runtime/controller.ts';
import { isApiError } from '../../runtime/errors.ts';
import { fieldManagers } from '../../runtime/field-managers.ts';
import type { KubeApi } from '../../runtime/kube-api.ts';
import { type KubeClient, objectKey } from '../../runtime/kube-client.ts';
import type { Converged } from '../../runtime/reconciler.ts';
import type { SyncConfig } from '../../sync/config.ts';
import { syncedKinds } from '../../sync/controllers/syncer.ts';
import { hostNamespacesOf } from '../../sync/controllers/syncer-caches.ts';
import { placementOf } from '../../sync/placement.ts';
import type { SyncedKind } from '../../sync/translate.ts';
import { releaseInstance, type VirtualClusterContext } from './context.ts';
import { instanceOutcome, type SyncerState, syncerFingerprint } from './desired.ts';
import { desiredSyncerIdentity, syncerServiceAccountName } from './identity.ts';
import type { Running } from './supervisor.ts';
import { ensureIdentity } from './syncer-identity.ts';
import { ServiceAccountTokens } from './token.ts';

/**
 * The syncer of an instance, registered or provisioned alike: its host identity, the probe of
 * the virtual cluster, and the syncer started, restarted when what it was started from changed,
 * stopped when it may not run. Only how the virtual cluster is reached and probed differs.
 */

/** How soon to look again while a new syncer identity's permissions reach the authorizer. */
const PERMISSIONS_RETRY_MS = 500;
/** How long a syncer waits for them before it starts anyway. */
const PERMISSIONS_GRACE_MS = 10_000;

/** What an instance's syncer is run from. */
export interface SyncerSource {
  /** The virtual cluster's connection, when there is one. */
  connection: Connection | undefined;
  /** How reaching it went so far (credentials missing or invalid), probed below when there is a connection. */
  access: ClusterAccess;
  /** The configuration's text (in the fingerprint), and the valid configuration (null: no syncer). */
  configText: string | undefined;
  syncConfig: SyncConfig | null;
  /** Whether the virtual cluster answers, with `client` (the running syncer's, or a new one). */
  probe: (client: KubeClient, connection: Connection) => Promise<Reachability>;
}

/**
 * Converges the instance's syncer from `source` and says what it came to (`Ready`, `Syncing`,
 * when to look again).
 */
export async function runSyncer(
  context: VirtualClusterContext,
  vci: Stored<VirtualClusterInstance>,
  source: SyncerSource,
  ctx: ReconcileContext,
): Promise<Converged<VirtualClusterInstanceStatus>> {
  const { supervisor } = context;
  const key = objectKey(vci);
  const { connection, syncConfig } = source;
  let access = source.access;
  const { hostNamespace, vclusterName } = placementOf(vci);
  const fingerprint =
    connection && source.configText !== undefined
      ? syncerFingerprint({ connection, config: source.configText, hostNamespace, vclusterName })
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
      access = { phase: 'probed', reachability: await source.probe(probeClient, connection) };
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
    onActivity: () => context.syncerActivity.set(key, context.clock.now()),
  });
}
