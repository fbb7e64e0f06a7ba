import { ApiException } from '@kubernetes/client-node';
import { errorReason } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';

/**
 * Whether the platform reaches a cluster's API with its credentials: a SelfSubjectReview (the
 * `kubectl auth whoami` call), which every authenticated identity may make, so it proves both
 * that the server answers and that it accepts our credentials, and writes nothing.
 */

export type Reachability =
  | { readonly reachable: true; readonly username: string }
  | {
      readonly reachable: false;
      /** `Unauthorized` (the server refused the credentials) or `Unreachable`. */
      readonly reason: 'Unauthorized' | 'Unreachable';
      readonly message: string;
    };

const DEFAULT_PROBE_TIMEOUT_MS = 5_000;

export async function probeCluster(
  api: KubeApi,
  server: string,
  timeoutMs = DEFAULT_PROBE_TIMEOUT_MS,
): Promise<Reachability> {
  try {
    const review = await api.request<{ status?: { userInfo?: { username?: string } } }>({
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
      timeoutMs,
    });
    return { reachable: true, username: review.status?.userInfo?.username ?? '' };
  } catch (err) {
    if (err instanceof ApiException && err.code === 401) {
      return {
        reachable: false,
        reason: 'Unauthorized',
        message: `the API server at ${server} refused the platform's credentials (401)`,
      };
    }
    const reason = errorReason(err);
    // Only the error's class and code: its message may quote a response body.
    const code = err instanceof ApiException ? ` (HTTP ${err.code})` : '';
    return {
      reachable: false,
      reason: 'Unreachable',
      message: `cannot reach the API server at ${server}: ${reason}${code}`,
    };
  }
}
