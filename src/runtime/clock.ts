/**
 * Time and randomness are passed in, never read from globals, so that tests can drive them.
 * `Clock.now()` is milliseconds since the Unix epoch.
 */
export interface Clock {
  now(): number;
  /** Calls `fn` once after `delayMs` unless cancelled first. */
  setTimer(delayMs: number, fn: () => void): Timer;
}

export interface Timer {
  cancel(): void;
}

/** A source of uniformly distributed numbers in [0, 1), like `Math.random`. */
export type Random = () => number;

/** The longest delay `setTimeout` honours (a 32-bit signed int); longer ones fire after 1 ms. */
export const MAX_TIMEOUT_MS = 2_147_483_647;

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(delayMs, fn) {
    // Deadlines beyond ~24.8 days (a 30-day key expiry) are reached in steps: one `setTimeout`
    // of such a length would fire at once and make a busy loop of whoever re-arms it.
    const due = Date.now() + Math.max(0, delayMs);
    let handle: ReturnType<typeof setTimeout>;
    const arm = (ms: number) => {
      handle = setTimeout(
        () => {
          const left = due - Date.now();
          if (left > 0) arm(left);
          else fn();
        },
        Math.min(ms, MAX_TIMEOUT_MS),
      );
    };
    arm(Math.max(0, delayMs));
    return { cancel: () => clearTimeout(handle) };
  },
};

export const systemRandom: Random = Math.random;

/** Resolves after `delayMs` on `clock`, or as soon as `signal` aborts (never rejects). */
export function sleep(clock: Clock, delayMs: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      timer.cancel();
      resolve();
    };
    const timer = clock.setTimer(delayMs, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** client-go's `wait.Jitter`: a duration in [base, base * (1 + maxFactor)). */
export function jitter(baseMs: number, maxFactor: number, random: Random): number {
  return baseMs + random() * maxFactor * baseMs;
}

/** Kubernetes `metav1.Time` (RFC 3339, second precision). */
export function formatTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * Kubernetes `metav1.MicroTime`: RFC 3339 with exactly six fractional digits; the apiserver
 * rejects any other number of digits.
 */
export function formatMicroTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
