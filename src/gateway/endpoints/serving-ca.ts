import { type FSWatcher, readFileSync, watch } from 'node:fs';
import { join } from 'node:path';

/**
 * The CA of the gateway's serving certificate: `ca.crt` in its certificate directory (as
 * cert-manager's Secrets and `platform dev` hold it). Read on the first request that needs it and
 * kept, read again after anything in the directory changes, so a renewed CA is the one handed
 * out: the directory is watched, not the file, as a mounted Secret is updated by swapping a link
 * in it. Where it cannot be watched, it is read on every request. None without TLS or without
 * that file (a certificate clients trust already).
 */
export class ServingCa {
  /** What the file held when last read, while nothing in the directory changed since. */
  private known: { readonly pem: string | undefined } | undefined;
  private watcher: FSWatcher | undefined;
  private closed = false;

  constructor(
    private readonly certDir: string | undefined,
    /** Reads the file (tests count the reads). */
    private readonly read: (path: string) => string = (path) => readFileSync(path, 'utf8'),
  ) {}

  /** The PEM CA, or undefined. */
  pem(): string | undefined {
    if (!this.certDir) return undefined;
    if (this.known) return this.known.pem;
    const watching = this.watch(this.certDir);
    let pem: string | undefined;
    try {
      pem = this.read(join(this.certDir, 'ca.crt'));
    } catch {
      pem = undefined;
    }
    // A change between the watch's start and this read comes as an event after it: it is not lost.
    if (watching) this.known = { pem };
    return pem;
  }

  /** Stops watching (the gateway stops). */
  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    this.known = undefined;
  }

  /** Whether the directory is watched (started on first use, and again after a watch failed). */
  private watch(certDir: string): boolean {
    if (this.watcher) return true;
    if (this.closed) return false;
    try {
      const watcher = watch(certDir, { persistent: false }, () => {
        this.known = undefined;
      });
      watcher.on('error', () => {
        watcher.close();
        if (this.watcher === watcher) this.watcher = undefined;
        this.known = undefined;
      });
      this.watcher = watcher;
      return true;
    } catch {
      return false;
    }
  }
}
