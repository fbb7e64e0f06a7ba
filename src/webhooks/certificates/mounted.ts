import { type FSWatcher, watch as watchDirectory } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { type Clock, systemClock, type Timer } from '../../runtime/clock.ts';
import type { CertificateSource, ServingMaterial } from '../server.ts';
import { PublishedMaterial } from './published.ts';

/**
 * External webhook certificates (cert-manager style): `tls.crt`, `tls.key`, `ca.crt` mounted from a
 * directory, reloaded when they change.
 */

export interface MountedCertificatesOptions {
  /** Directory with `tls.crt`, `tls.key` and `ca.crt` (a mounted cert-manager Secret). */
  readonly directory: string;
  readonly clock?: Clock;
  /** Polling interval besides filesystem events (kubelet swaps files by symlink, which some watchers miss). */
  readonly pollSeconds?: number;
  readonly logger?: Logger;
}

/** The mounted files do not form a usable certificate (missing, or key and certificate do not match). */
export class InvalidMountedCertificate extends Error {
  override readonly name = 'InvalidMountedCertificate';
}

/** Certificates provided from outside (cert-manager), reloaded when the files change. */
export class MountedCertificates extends PublishedMaterial implements CertificateSource {
  private watcher: FSWatcher | undefined;
  private timer: Timer | undefined;
  private stopped = false;
  private readonly clock: Clock;

  constructor(private readonly options: MountedCertificatesOptions) {
    super();
    this.clock = options.clock ?? systemClock;
  }

  /** Loads the files (throws {@link InvalidMountedCertificate} when unusable) and starts watching. */
  async start(): Promise<void> {
    await this.reload();
    try {
      this.watcher = watchDirectory(this.options.directory, () => {
        void this.reloadLogged();
      });
    } catch {
      // Polling alone still picks up changes.
    }
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.close();
    this.timer?.cancel();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimer((this.options.pollSeconds ?? 10) * 1000, () => {
      void this.reloadLogged().finally(() => this.schedule());
    });
  }

  private async reloadLogged(): Promise<void> {
    try {
      await this.reload();
    } catch (err) {
      // Half-written files during a swap are normal; keep serving the previous material.
      this.options.logger?.warn(
        { err: err instanceof Error ? err.message : 'unknown' },
        'mounted webhook certificate not reloaded',
      );
    }
  }

  /** Reads the files; emits when they changed and form a valid pair. */
  async reload(): Promise<boolean> {
    const read = (name: string) => readFile(join(this.options.directory, name), 'utf8');
    let material: ServingMaterial;
    try {
      const [certPem, keyPem, caBundlePem] = await Promise.all([
        read('tls.crt'),
        read('tls.key'),
        read('ca.crt'),
      ]);
      material = { certPem, keyPem, caBundlePem };
    } catch (err) {
      throw new InvalidMountedCertificate(
        `cannot read tls.crt, tls.key and ca.crt: ${err instanceof Error ? err.message : err}`,
      );
    }
    if (
      this.material &&
      this.material.certPem === material.certPem &&
      this.material.keyPem === material.keyPem &&
      this.material.caBundlePem === material.caBundlePem
    ) {
      return false;
    }
    try {
      createSecureContext({ cert: material.certPem, key: material.keyPem });
    } catch {
      throw new InvalidMountedCertificate('tls.key does not match tls.crt (or either is not PEM)');
    }
    this.publish(material, true);
    return true;
  }
}
