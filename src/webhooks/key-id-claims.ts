import { MANAGED_BY, MANAGED_BY_LABEL } from '../api/labels.ts';
import { GROUP_VERSION } from '../api/meta.ts';
import type { OwnedAccessKey } from '../api/ownedaccesskey.ts';
import { resources } from '../api/resources.ts';
import { isAlreadyExists, isConflict, isNotFound } from '../runtime/errors.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import { collectionPath, type ObjectList, objectPath, type ResourceRef } from '../runtime/kube-client.ts';

const LEASES: ResourceRef = {
  group: 'coordination.k8s.io',
  version: 'v1',
  plural: 'leases',
  namespaced: true,
};

/**
 * Access key ids are unique. A key id is public (it is the first part of every key and names the
 * key in logs), so anyone may try to create a key that carries another key's id with a secret of
 * their own. Admission refuses that, also when the creates race: each new key claims its id with
 * a Lease `accesskey-id-<id>` in the platform namespace, owned by the key (so garbage collection
 * removes the claim with the key). Creating an object is atomic in the apiserver, so of several
 * concurrent creates with one id exactly one claim succeeds; the others are refused.
 *
 * A claim whose key does not exist is stale (the create it was made for was refused later on, or
 * the key is gone and garbage collection has not caught up) once it is older than
 * {@link STALE_CLAIM_MS} (by its `spec.acquireTime`); younger ones are kept, as their key may
 * still be on its way to storage.
 * Keys that existed before claims (or were stored while the webhook was away) are found by a list
 * by the selectable field `spec.keyId`.
 */

const CLAIM_PREFIX = 'accesskey-id-';
/** How long a claim without its key is honoured (a create in flight takes milliseconds). */
export const STALE_CLAIM_MS = 5 * 60_000;

export interface ClaimedKey {
  readonly name: string;
  readonly uid: string;
  readonly keyId: string;
}

export type ClaimOutcome = 'claimed' | 'taken';

interface Lease {
  metadata: {
    name?: string;
    uid?: string;
    creationTimestamp?: string;
    ownerReferences?: { uid?: string; name?: string }[];
  };
  spec?: { acquireTime?: string };
}

/** Whether a claim found in the way belongs to `key`, may be taken over, or stands. Pure. */
export function judgeClaim(
  claim: Lease,
  key: ClaimedKey,
  ownerExists: boolean,
  now: number,
): 'ours' | 'stale' | 'taken' {
  const owner = claim.metadata.ownerReferences?.[0];
  if (owner?.uid === key.uid) return 'ours';
  const created = Date.parse(claim.spec?.acquireTime ?? claim.metadata.creationTimestamp ?? '');
  if (!ownerExists && Number.isFinite(created) && now - created >= STALE_CLAIM_MS) return 'stale';
  return 'taken';
}

export class KeyIdClaims {
  constructor(
    private readonly api: KubeApi,
    private readonly platformNamespace: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** Claims `key.keyId` for `key`; `taken` when another key holds it. */
  async claim(key: ClaimedKey): Promise<ClaimOutcome> {
    if (await this.otherKeyHasId(key)) return 'taken';
    const path = objectPath(LEASES, this.platformNamespace, `${CLAIM_PREFIX}${key.keyId}`);
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.api.request({
          method: 'POST',
          path: collectionPath(LEASES, this.platformNamespace),
          body: {
            apiVersion: 'coordination.k8s.io/v1',
            kind: 'Lease',
            metadata: {
              name: `${CLAIM_PREFIX}${key.keyId}`,
              namespace: this.platformNamespace,
              labels: { [MANAGED_BY_LABEL]: MANAGED_BY },
              ownerReferences: [
                { apiVersion: GROUP_VERSION, kind: 'OwnedAccessKey', name: key.name, uid: key.uid },
              ],
            },
            spec: {
              holderIdentity: key.name,
              acquireTime: new Date(this.now()).toISOString().replace('Z', '000Z'),
            },
          },
        });
        return 'claimed';
      } catch (error) {
        if (!isAlreadyExists(error)) throw error;
      }
      const claim = await this.api.request<Lease>({ method: 'GET', path }).catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
      if (!claim) continue; // gone in between: claim it now
      const owner = claim.metadata.ownerReferences?.[0];
      const judged = judgeClaim(claim, key, owner ? await this.keyExists(owner) : false, this.now());
      if (judged === 'ours') return 'claimed';
      if (judged === 'taken') return 'taken';
      // Stale: take it over, deleting exactly the claim judged (its uid), then try again.
      await this.api
        .request({
          method: 'DELETE',
          path,
          body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: claim.metadata.uid } },
        })
        .catch((error: unknown) => {
          // Gone, or replaced by someone else first (the uid precondition failed): try again.
          if (!isNotFound(error) && !isConflict(error)) throw error;
        });
    }
    return 'taken';
  }

  private async otherKeyHasId(key: ClaimedKey): Promise<boolean> {
    const list = await this.api.request<ObjectList<OwnedAccessKey>>({
      method: 'GET',
      path: collectionPath(resources.ownedAccessKeys),
      query: { fieldSelector: `spec.keyId=${key.keyId}` },
    });
    return list.items.some((item) => item.metadata.uid !== key.uid);
  }

  private async keyExists(owner: { uid?: string; name?: string }): Promise<boolean> {
    if (!owner.name) return false;
    const found = await this.api
      .request<OwnedAccessKey>({
        method: 'GET',
        path: objectPath(resources.ownedAccessKeys, undefined, owner.name),
      })
      .catch((error: unknown) => {
        if (isNotFound(error)) return undefined;
        throw error;
      });
    return found !== undefined && found.metadata.uid === owner.uid;
  }
}
