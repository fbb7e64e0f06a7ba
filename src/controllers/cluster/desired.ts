import {
  type ClusterAccess,
  RECHECK_MS,
  RETRY_CONNECTION_MS,
  reachabilityCondition,
} from '../../clusters/access.ts';
import type { ConditionInput } from '../../runtime/conditions.ts';

/**
 * The pure parts of the connected-cluster controller: the `Ready` condition from what the
 * reachability probe found, and when to look again.
 */

export { type ClusterAccess, RECHECK_MS, RETRY_CONNECTION_MS } from '../../clusters/access.ts';

/** True when the platform reaches the cluster's API with the credentials of `spec.credentialsSecretRef`. */
export function readyCondition(access: ClusterAccess, generation: number | undefined): ConditionInput {
  return reachabilityCondition(access, "the cluster's API", generation);
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
