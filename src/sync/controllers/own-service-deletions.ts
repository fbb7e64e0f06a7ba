import type { Clock } from '../../runtime/clock.ts';

/**
 * How long after the syncer deleted a host Service the absence of that Service's host Endpoints
 * is taken for the syncer's own doing. The host's endpoints controller acts on the deletion when
 * it gets to it; a minute covers a busy controller manager many times over.
 */
export const OWN_SERVICE_DELETION_WINDOW_MS = 60_000;

/**
 * The host Services one syncer deleted itself (to recreate one for a new virtual uid, say), by
 * the key of their virtual Service. Deleting a Service deletes the host Endpoints of its name up
 * to twice: the apiserver within the DELETE request (so their watch event can be handled before
 * the request answers), and the host's endpoints controller later, even Endpoints written after
 * the deletion. Such an absence brings the host Endpoints back instead of deleting the tenant's
 * virtual Endpoints; after the window, a deletion on the host is again one (it reaches the
 * virtual cluster, as vcluster does). Erring inside the window recreates host Endpoints somebody
 * deleted on purpose, never loses a tenant's object.
 */
export class OwnServiceDeletions {
  private readonly excusedUntil = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly windowMs = OWN_SERVICE_DELETION_WINDOW_MS,
  ) {}

  /** Before the DELETE of the host Service of `key` is sent. */
  announce(key: string): void {
    const now = this.clock.now();
    for (const [other, until] of this.excusedUntil) if (until <= now) this.excusedUntil.delete(other);
    this.excusedUntil.set(key, now + this.windowMs);
  }

  /** The DELETE failed: nothing was deleted, nothing is excused. */
  withdraw(key: string): void {
    this.excusedUntil.delete(key);
  }

  /** Whether a missing host Endpoints of `key` is the syncer's own doing. */
  excuses(key: string): boolean {
    const until = this.excusedUntil.get(key);
    if (until === undefined) return false;
    if (until > this.clock.now()) return true;
    this.excusedUntil.delete(key);
    return false;
  }

  /** The virtual object is gone: nothing is left to bring back. */
  forget(key: string): void {
    this.excusedUntil.delete(key);
  }
}
