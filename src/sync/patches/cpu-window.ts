/**
 * The CPU time a sandbox's calls spent over a sliding window (the `cpuBudget` of sandbox.ts):
 * one sample per call, oldest first from `head` on, and their sum; samples that left the window
 * are dropped as the window is read.
 */
export class CpuWindow {
  private samples: { at: number; ms: number }[] = [];
  private head = 0;
  private sum = 0;

  constructor(
    private readonly windowMs: number,
    /** Milliseconds clock. */
    private readonly now: () => number,
  ) {}

  /** CPU milliseconds spent in the current window. */
  usedMs(): number {
    const since = this.now() - this.windowMs;
    const samples = this.samples;
    while (this.head < samples.length && samples[this.head]!.at <= since) {
      this.sum -= samples[this.head]!.ms;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > samples.length) {
      this.samples = samples.slice(this.head);
      this.head = 0;
    }
    if (this.head === this.samples.length) this.sum = 0; // no drift from float sums
    return this.sum;
  }

  /** A call's CPU time, counted now. */
  record(ms: number): void {
    this.samples.push({ at: this.now(), ms });
    this.sum += ms;
  }
}
