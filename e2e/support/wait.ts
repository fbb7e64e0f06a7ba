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
