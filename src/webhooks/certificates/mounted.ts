import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createSecureContext } from 'node:tls';
import type { CertificateSource, ServingMaterial } from '../server.ts';
import { PublishedMaterial } from './published.ts';

/**
 * External webhook certificates (cert-manager style): `tls.crt`, `tls.key`, `ca.crt` mounted from a
 * directory, reloaded when they change. Half-written files during a swap are normal: a reload
 * that fails keeps the previous material, and is retried.
 */

export interface MountedCertificatesOptions {
  /** Directory with `tls.crt`, `tls.key` and `ca.crt` (a mounted cert-manager Secret). */
  readonly directory: string;
}

/** The mounted files do not form a usable certificate (missing, or key and certificate do not match). */
export class InvalidMountedCertificate extends Error {
  override readonly name = 'InvalidMountedCertificate';
}

/**
 * Certificates provided from outside (cert-manager). {@link reload} reads the files once;
 * `rotation.ts` runs it as a controller of the Manager, woken by filesystem events and a poll.
 */
export class MountedCertificates extends PublishedMaterial implements CertificateSource {
  constructor(private readonly options: MountedCertificatesOptions) {
    super();
  }

  get directory(): string {
    return this.options.directory;
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
