import { type FSWatcher, watch as watchDirectory } from 'node:fs';
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
 * Runs the rotation of the self-managed webhook certificates as a controller of `manager`: its
 * one key is the serving Secret, reconciled every `checkIntervalMs` (renewal, other replicas'
 * rotations), and after a failure again with the controller's backoff. Every replica runs it (no
 * leader election): each serves its own copy of the material and must adopt the current one.
 * The caller has loaded the material once before (`certificates.reconcile()`); remove the
 * returned controller to stop.
 */
export function runCertificateRotation(
  manager: Manager,
  certificates: SelfManagedCertificates,
  checkIntervalMs: number,
): Controller {
  const controller = manager.controller({
    name: CERTIFICATE_ROTATION_CONTROLLER,
    needLeaderElection: false,
    // Nothing is cached to resync: the requeue below is the period.
    resyncPeriodMs: 0,
    reconcile: async () => {
      try {
        await certificates.reconcile();
      } catch (err) {
        throw new CertificateRotationFailed(errorReason(err));
      }
      return { requeueAfter: checkIntervalMs };
    },
  });
  // The controller has no informer to replay; its first pass is due one period after the load.
  void controller.whenStarted().then((started) => {
    if (started) controller.enqueueAfter(certificates.secretKey, checkIntervalMs);
  });
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
