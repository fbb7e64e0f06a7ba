import type { Reachability } from '../../clusters/reachability.ts';
import type { ConditionInput } from '../../runtime/conditions.ts';

/**
 * The pure parts of the connected-cluster controller: the `Ready` condition from what the
 * reachability probe found, and when to look again.
 */

export const READY_CONDITION = 'Ready';

/** How long to wait before probing a reachable cluster again (a rotation shows within a minute). */
export const RECHECK_MS = 60_000;
/** How long to wait before looking again at missing credentials or a cluster that does not answer. */
export const RETRY_CONNECTION_MS = 10_000;

/** How the platform reaches the cluster: no usable credentials, or the probe's answer. */
export type ClusterAccess =
  | {
      readonly phase: 'noCredentials';
      /** `CredentialsMissing` or `InvalidCredentials` (the error class of `connectionFor`). */
      readonly reason: string;
      readonly message: string;
    }
  | { readonly phase: 'probed'; readonly reachability: Reachability };

/**
 * The `Ready` condition, the one GitOps tools read: True when the platform reaches the cluster's
 * API with the credentials of `spec.credentialsSecretRef`. Messages depend only on the object,
 * the Secret and the probe's outcome, never on the time, so an unchanged cluster writes nothing.
 */
export function readyCondition(access: ClusterAccess, generation: number | undefined): ConditionInput {
  const base = {
    type: READY_CONDITION,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
  if (access.phase === 'noCredentials')
    return { ...base, status: 'False', reason: access.reason, message: access.message };
  const { reachability } = access;
  if (!reachability.reachable)
    return { ...base, status: 'False', reason: reachability.reason, message: reachability.message };
  const who = reachability.username ? ` as ${reachability.username}` : '';
  return {
    ...base,
    status: 'True',
    reason: 'Reachable',
    message: `the platform reaches the cluster's API${who}`,
  };
}

/**
 * When to reconcile again: every minute while reachable, every 10 s otherwise (the Secret is not
 * watched, so a fixed one is found this way). Without `spec.credentialsSecretRef` there is
 * nothing to look at until the spec changes, which is an event of its own.
 */
export function recheckAfter(access: ClusterAccess, hasCredentialsRef: boolean): number | undefined {
  if (!hasCredentialsRef) return undefined;
  return access.phase === 'probed' && access.reachability.reachable ? RECHECK_MS : RETRY_CONNECTION_MS;
}
