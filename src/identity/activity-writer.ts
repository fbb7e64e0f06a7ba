import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources } from '../api/resources.ts';
import { isConflict, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { objectPath } from '../runtime/kube-client.ts';
import type { ActivityWrite, ActivityWriter } from './activity.ts';

/**
 * The {@link ActivityWriter} of access keys on the apiserver, by the contract: never move
 * `status.lastActivity` backwards, skip keys that are gone. The status subresource is patched with
 * the stored resourceVersion as a precondition, so a concurrent newer write makes this one fail
 * and be retried against the newer value. `cached` is the key as the caches hold it.
 */
export function keyActivityWriter(
  api: KubeApi,
  cached: (keyName: string) => OwnedAccessKey | undefined,
): ActivityWriter {
  return async (batch) => {
    const results = await Promise.allSettled(batch.map((write) => writeOne(api, cached, write)));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  };
}

async function writeOne(
  api: KubeApi,
  cached: (keyName: string) => OwnedAccessKey | undefined,
  { keyName, lastActivity }: ActivityWrite,
): Promise<void> {
  // Stored timestamps have whole seconds: compare and write at that precision.
  const value = new Date(Math.floor(lastActivity.getTime() / 1000) * 1000);
  const path = objectPath(resources.ownedAccessKeys, undefined, keyName);
  let key: OwnedAccessKey | undefined = cached(keyName);
  // The cache may lag our own previous write: on a conflict, read the key afresh and try again.
  for (let attempt = 0; ; attempt++) {
    if (!key) return;
    const stored = key.status?.lastActivity ? Date.parse(key.status.lastActivity) : Number.NaN;
    if (stored >= value.getTime()) return;
    try {
      await api.request({
        method: 'PATCH',
        path: `${path}/status`,
        contentType: 'application/merge-patch+json',
        body: {
          metadata: { resourceVersion: key.metadata.resourceVersion },
          status: { lastActivity: value.toISOString().replace(/\.\d{3}Z$/, 'Z') },
        },
      });
      return;
    } catch (err) {
      if (isNotFound(err)) return;
      if (!isConflict(err) || attempt >= 2) throw err;
    }
    try {
      key = await api.request<OwnedAccessKey>({ method: 'GET', path });
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
  }
}
