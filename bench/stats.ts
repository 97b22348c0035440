/** Small statistics helpers. */

export function sorted(xs: number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}

/** Percentile by linear interpolation between closest ranks (p in 0..100). */
export function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = sorted(xs);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return s[lo] + (s[hi] - s[lo]) * (rank - lo);
}

export const median = (xs: number[]) => percentile(xs, 50);
export const min = (xs: number[]) => (xs.length ? Math.min(...xs) : NaN);
export const max = (xs: number[]) => (xs.length ? Math.max(...xs) : NaN);

export interface Summary {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function summarize(xs: number[]): Summary {
  return { median: median(xs), min: min(xs), max: max(xs), n: xs.length };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Monotonic ms (this process's clock). */
export const now = () => performance.now();
