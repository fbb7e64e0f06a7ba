import { type FSWatcher, watch as watchDirectory } from 'node:fs';
import type { V1Secret } from '@kubernetes/client-node';
import { resources } from '../../api/resources.ts';
import type { Controller } from '../../runtime/controller.ts';
import { errorReason } from '../../runtime/errors.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { MountedCertificates } from './mounted.ts';
import type { SelfManagedCertificates } from './self-managed.ts';

/** The names of the controllers (metrics, logs). */
const CERTIFICATE_ROTATION_CONTROLLER = 'webhook-certificates';
const MOUNTED_CERTIFICATES_CONTROLLER = 'webhook-certificate-files';

/** A rotation or reload pass failed; carries only the failure's class or API reason (never a body that could hold key material). */
export class CertificateRotationFailed extends Error {
  override readonly name = 'CertificateRotationFailed';
}

/**
 * The shortest requeue: a due time at or just past now (the planner's boundary, a clock step)
 * comes back a moment later rather than in a loop.
 */
const SHORTEST_REQUEUE_MS = 1000;

/**
 * Runs the rotation of the self-managed webhook certificates as a controller of `manager`: its
 * one key is the serving Secret, watched by name (an informer on that one Secret), so another
 * replica's rotation or an edit is adopted when its event arrives; and reconciled again when the
 * material falls due ({@link SelfManagedCertificates.dueInMs}: a renewal, a staged CA's promotion),
 * or after a failure with the controller's backoff. Every replica runs it (no leader election):
 * each serves its own copy of the material and must adopt the current one. The caller has loaded
 * the material once before (`certificates.reconcile()`); remove the returned controller to stop.
 */
export function runCertificateRotation(manager: Manager, certificates: SelfManagedCertificates): Controller {
  const secret = manager.informer<V1Secret>(resources.secrets, {
    namespace: certificates.namespace,
    fieldSelector: `metadata.name=${certificates.name}`,
  });
  const controller = manager.controller({
    name: CERTIFICATE_ROTATION_CONTROLLER,
    needLeaderElection: false,
    // The watch and the due time say when to look; a periodic resync would only repeat them.
    resyncPeriodMs: 0,
    reconcile: async () => {
      try {
        await certificates.reconcile();
      } catch (err) {
        throw new CertificateRotationFailed(errorReason(err));
      }
      return { requeueAfter: Math.max(certificates.dueInMs(), SHORTEST_REQUEUE_MS) };
    },
  });
  // A deleted Secret enqueues its key too: the pass recreates it.
  controller.watchPrimary(secret);
  return controller;
}

/**
 * Runs the reloading of mounted webhook certificates as a controller of `manager`: its one key is
 * the directory, reconciled when a filesystem event says the files changed and every `pollMs`
 * (kubelet swaps the files by symlink, which some watchers miss); a reload that fails (files
 * half-written) keeps the material served and is retried with the controller's backoff. Every
 * replica runs it. The caller has loaded the files once before (`certificates.reload()`); call
 * the returned `stop` to end it.
 */
export function runMountedCertificateReload(
  manager: Manager,
  certificates: MountedCertificates,
  pollMs: number,
): { readonly controller: Controller; stop(): Promise<void> } {
  const controller = manager.controller({
    name: MOUNTED_CERTIFICATES_CONTROLLER,
    needLeaderElection: false,
    resyncPeriodMs: 0,
    reconcile: async () => {
      try {
        await certificates.reload();
      } catch (err) {
        throw new CertificateRotationFailed(errorReason(err));
      }
      return { requeueAfter: pollMs };
    },
  });
  let watcher: FSWatcher | undefined;
  try {
    watcher = watchDirectory(certificates.directory, () => controller.enqueue(certificates.directory));
  } catch {
    // Polling alone still picks up changes.
  }
  void controller.whenStarted().then((started) => {
    if (started) controller.enqueueAfter(certificates.directory, pollMs);
  });
  return {
    controller,
    stop: async () => {
      watcher?.close();
      await manager.removeController(controller);
    },
  };
}
