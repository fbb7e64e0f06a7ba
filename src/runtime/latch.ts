/**
 * A gate callers wait on: `wait` resolves true once the gate is open (at once if it is), false
 * if the caller's signal aborts first. It may close again (a controller stopped, to be started
 * again later); waiting then lasts until the next opening.
 */
export class Latch {
  private opened = false;
  private readonly waiters = new Set<() => void>();

  get isOpen(): boolean {
    return this.opened;
  }

  open(): void {
    this.opened = true;
    for (const waiter of this.waiters) waiter();
    this.waiters.clear();
  }

  close(): void {
    this.opened = false;
  }

  wait(signal?: AbortSignal): Promise<boolean> {
    if (this.opened) return Promise.resolve(true);
    if (signal?.aborted) return Promise.resolve(false);
    return new Promise((resolve) => {
      const onAbort = () => {
        this.waiters.delete(waiter);
        resolve(false);
      };
      const waiter = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve(true);
      };
      this.waiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
