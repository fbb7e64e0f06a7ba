/**
 * Polls `check` until it holds; throws after `timeoutMs` naming `what`. A bound on waiting for
 * convergence, not a performance assertion: generous limits, never measured against.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Polls `read` until `ok` holds (default 30 s) and returns the value that satisfied it; on a
 * timeout the error carries the last value seen.
 */
export async function waitForValue<T>(
  what: string,
  read: () => Promise<T>,
  ok: (value: T) => boolean,
  ms = 30_000,
): Promise<T> {
  let last: T | undefined;
  await eventually(
    async () => {
      last = await read();
      return ok(last);
    },
    ms,
    what,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; last seen: ${JSON.stringify(last)?.slice(0, 2000)}`);
  });
  return last as T;
}
