/**
 * Go's `time.ParseDuration`, in milliseconds: an optionally signed sequence of decimal numbers,
 * each with an optional fraction and a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`, `h`), such
 * as `300ms`, `-1.5h` or `2h45m`; `0` alone needs no unit. Returns undefined for anything Go
 * would refuse.
 */
export function parseGoDuration(text: string): number | undefined {
  const match = /^([-+]?)(.*)$/s.exec(text);
  const sign = match?.[1] === '-' ? -1 : 1;
  const body = match?.[2] ?? '';
  if (body === '0') return 0;
  if (body === '') return undefined;
  const unitMs: Record<string, number> = {
    ns: 1e-6,
    us: 1e-3,
    µs: 1e-3,
    μs: 1e-3,
    ms: 1,
    s: 1000,
    m: 60_000,
    h: 3_600_000,
  };
  const part = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let total = 0;
  let index = 0;
  while (index < body.length) {
    part.lastIndex = index;
    const piece = part.exec(body);
    if (!piece) return undefined;
    total += Number(piece[1]) * (unitMs[piece[2] ?? ''] ?? Number.NaN);
    index = part.lastIndex;
  }
  return Number.isFinite(total) ? sign * total : undefined;
}
