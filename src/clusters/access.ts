import { KubeConfig } from '@kubernetes/client-node';
import type { ConditionInput } from '../runtime/conditions.ts';
import { isNotFound } from '../runtime/errors.ts';
import type { FieldManager } from '../runtime/field-managers.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { KubeClient } from '../runtime/kube-client.ts';
import { type Connection, kubeConfigOptions } from './connection.ts';
import type { Reachability } from './reachability.ts';

/**
 * What the controllers of managed clusters (connected clusters, virtual clusters) share: reading a
 * credentials Secret, a client for a connection, and the `Ready` condition of reachability.
 */

export const READY_CONDITION = 'Ready';
/** How long to wait before probing a reachable cluster again (a rotation shows within a minute). */
export const RECHECK_MS = 60_000;
/** How long to wait before looking again at missing credentials or a cluster that does not answer. */
export const RETRY_CONNECTION_MS = 10_000;

/** How the platform reaches a cluster: no usable credentials, or the reachability probe's answer. */
export type ClusterAccess =
  | {
      readonly phase: 'noCredentials';
      /** `CredentialsMissing` or `InvalidCredentials` (the error class of `connectionFor`). */
      readonly reason: string;
      readonly message: string;
    }
  | { readonly phase: 'probed'; readonly reachability: Reachability };

/** A credentials Secret's `data` (base64 values), or null when it does not exist. Never logged. */
export async function readCredentialsSecret(
  api: KubeApi,
  namespace: string,
  name: string,
): Promise<Record<string, string> | null> {
  try {
    const secret = await api.request<{ data?: Record<string, string> }>({
      method: 'GET',
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(name)}`,
    });
    return secret.data ?? {};
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** A client of the connected cluster; its writes are named `fieldManager` (the component's). */
export function clientForConnection(connection: Connection, fieldManager: FieldManager): KubeClient {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions(kubeConfigOptions(connection));
  return new KubeClient(kubeConfig, { fieldManager });
}

/**
 * The `Ready` condition of reachability: True (`Reachable`) when the platform reaches `what`
 * (for example "the cluster's API") with its credentials, False with why not. Messages depend
 * only on the object, the Secret and the probe's outcome, never on the time, so an unchanged
 * cluster writes nothing.
 */
export function reachabilityCondition(
  access: ClusterAccess,
  what: string,
  generation: number | undefined,
): ConditionInput {
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
  return { ...base, status: 'True', reason: 'Reachable', message: `the platform reaches ${what}${who}` };
}
