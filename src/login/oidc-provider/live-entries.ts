/**
 * How many live (unexpired) entries each model of the OpenID provider holds, for its bound on
 * entries per model, without a walk over every cached Secret on each write. The entries of each
 * model and their expiries are kept as the informer reports them (`set`, `remove`). Below the bound
 * the answer is the number stored (expired ones included: at most that many are live), at no
 * cost; only a model holding `limit` entries or more has its live ones counted, and that count is
 * kept until the model's entries change or the first of the counted ones expires, so a flood of
 * refused new entries (nothing changes) costs one count, not one per attempt.
 */
export class LiveEntries {
  /** model -> entry name -> when it expires (ms since the epoch) */
  private readonly entries = new Map<string, Map<string, number>>();
  /** model -> its live entries as last counted, valid until the earliest of their expiries */
  private readonly counted = new Map<string, { readonly live: number; readonly until: number }>();

  /** Records an entry of `model` (added or changed) and when it expires. */
  set(model: string, name: string, expiresAt: number): void {
    let entries = this.entries.get(model);
    if (!entries) {
      entries = new Map();
      this.entries.set(model, entries);
    }
    entries.set(name, expiresAt);
    this.counted.delete(model);
  }

  /** Forgets an entry of `model` (deleted). */
  remove(model: string, name: string): void {
    const entries = this.entries.get(model);
    if (!entries?.delete(name)) return;
    if (entries.size === 0) this.entries.delete(model);
    this.counted.delete(model);
  }

  /** Whether `model` holds `limit` or more entries that are live at `now`. */
  full(model: string, limit: number, now: number): boolean {
    const entries = this.entries.get(model);
    if (!entries || entries.size < limit) return false;
    const known = this.counted.get(model);
    if (known && now < known.until) return known.live >= limit;
    let live = 0;
    let until = Number.POSITIVE_INFINITY;
    for (const expiresAt of entries.values()) {
      if (expiresAt <= now) continue;
      live += 1;
      until = Math.min(until, expiresAt);
    }
    this.counted.set(model, { live, until });
    return live >= limit;
  }
}
