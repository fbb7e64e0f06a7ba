import type { V1Secret } from '@kubernetes/client-node';
import { resources } from '../api/resources.ts';
import type { KubeApi } from '../runtime/kube-api.ts';
import type { Manager } from '../runtime/manager.ts';
import {
  DEFAULT_ROTATION_POLICY,
  type KeyFactory,
  type RotationPolicy,
  ringFromSecret,
  rotateKeyRing,
  SIGNING_KEYS_SECRET,
  type SigningKey,
  SigningKeyStore,
} from './signing-keys.ts';

/**
 * The token signing keys as every part of a process reads them (the gateway's direct tokens and
 * JWKS, the OpenID provider's ID tokens): the informer's copy of their Secret, watched by name as
 * the platform-config Secret is, so a key another replica adds is seen when its watch event
 * arrives and a read costs no apiserver round trip. The apiserver is asked only to rotate (when
 * the cached ring is due for it, through {@link SigningKeyStore.ensure}, which settles races
 * between replicas) or while the cache has not synced yet.
 */
export interface SigningKeyRing {
  /** The ring in effect now, rotated first when due. */
  current(): Promise<readonly SigningKey[]>;
}

export interface SigningKeyRingOptions {
  /** Where rotations are written (the caller's field manager). */
  readonly api: KubeApi;
  readonly policy?: RotationPolicy;
  readonly generate?: KeyFactory;
}

/** Stands in for a new key when only asking whether a rotation is due (no key pair is made). */
const placeholderKey: KeyFactory = async () => ({ kid: '', privateJwk: {} });

/** Whether {@link rotateKeyRing} would change `ring` at `now`: the rotation rule, not a copy of it. */
async function rotationDue(ring: readonly SigningKey[], now: number, policy: RotationPolicy) {
  return (await rotateKeyRing(ring, now, policy, placeholderKey)) !== ring;
}

const rings = new WeakMap<Manager, Map<string, SigningKeyRing>>();

/**
 * The ring of `manager` for `platformNamespace`: created on first use (its informer registered on
 * the manager, so call it before the manager starts), the same object for every later caller,
 * whose options are then those of the first.
 */
export function signingKeyRing(
  manager: Manager,
  platformNamespace: string,
  options: SigningKeyRingOptions,
): SigningKeyRing {
  const byNamespace = rings.get(manager) ?? new Map<string, SigningKeyRing>();
  rings.set(manager, byNamespace);
  const existing = byNamespace.get(platformNamespace);
  if (existing) return existing;
  const policy = options.policy ?? DEFAULT_ROTATION_POLICY;
  const store = new SigningKeyStore(options.api, platformNamespace, policy, options.generate);
  const informer = manager.informer<V1Secret>(resources.secrets, {
    namespace: platformNamespace,
    fieldSelector: `metadata.name=${SIGNING_KEYS_SECRET}`,
  });
  const key = `${platformNamespace}/${SIGNING_KEYS_SECRET}`;
  // One rotation at a time per process; concurrent callers share it.
  let rotating: Promise<readonly SigningKey[]> | undefined;
  const rotate = (now: number) => {
    rotating ??= store.ensure(now).finally(() => {
      rotating = undefined;
    });
    return rotating;
  };
  const ring: SigningKeyRing = {
    async current() {
      const now = manager.clock.now();
      if (!informer.hasSynced()) return rotate(now);
      const cached = ringFromSecret(informer.store.get(key));
      return (await rotationDue(cached, now, policy)) ? rotate(now) : cached;
    },
  };
  byNamespace.set(platformNamespace, ring);
  return ring;
}
