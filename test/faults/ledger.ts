/**
 * Rules read from the attempt ledger (acta.all_executions: one row per ended attempt, written by the
 * call that ended it; a success moved to acta.succeeded_jobs is its own attempt's row) for test/faults/policies.test.ts. Times are ms since the epoch on the
 * database clock, to the microsecond. An attempt's interval is [claimed_at, finished_at): from its
 * claim to the write that ended it (its completion, or the recovery pass that returned its row),
 * which is when it held its concurrency slot or its lane. A running attempt has no row yet: read
 * the ledger once the attempts of interest have ended.
 */
import type { FaultServer } from './harness';

export interface Attempt {
  jobId: string;
  execution: number;
  workerId: string | null;
  outcome: string;
  charged: boolean;
  claimedAt: number;
  finishedAt: number;
  definition: string;
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
  /** The job's enqueue time. */
  createdAt: number;
  payload: Record<string, unknown>;
}

const ms = (column: string) => `(extract(epoch from ${column}) * 1000)::float8`;

/** Every ended attempt of the namespace's jobs, in claim order (claimed_at, then job id, execution). */
export async function ledger(server: FaultServer, namespace: string): Promise<Attempt[]> {
  const rows = await server.query<Attempt>(
    `select e.job_id::text as "jobId", e.execution, e.worker_id::text as "workerId", e.outcome, e.charged,
            ${ms('e.claimed_at')} as "claimedAt", ${ms('e.finished_at')} as "finishedAt",
            j.definition, j.concurrency_key as "concurrencyKey", j.rate_key as "rateKey", j.lane,
            ${ms('j.created_at')} as "createdAt", j.payload
       from acta.all_executions e join acta.all_jobs j on j.id = e.job_id
      where j.namespace = $1
      order by e.claimed_at, e.job_id, e.execution`,
    [namespace],
  );
  return rows;
}

/**
 * The most attempts whose intervals [claimedAt, finishedAt) share an instant within [from, to)
 * (default: ever), and the first instant where that many overlap. A sweep over the intervals'
 * ends: at one instant, attempts that end there are gone before those that start there count.
 */
export function maxOverlap(attempts: readonly Attempt[], window: { from?: number; to?: number } = {}): { max: number; at: number | null } {
  const from = window.from ?? -Infinity;
  const to = window.to ?? Infinity;
  const edges = new Map<number, number>();
  for (const a of attempts) {
    edges.set(a.claimedAt, (edges.get(a.claimedAt) ?? 0) + 1);
    edges.set(a.finishedAt, (edges.get(a.finishedAt) ?? 0) - 1);
  }
  const times = [...edges.keys()].sort((x, y) => x - y);
  let running = 0;
  let best = { max: 0, at: null as number | null };
  times.forEach((t, i) => {
    running += edges.get(t)!;
    // `running` holds on [t, next edge): count it if that span meets the window.
    const next = times[i + 1] ?? Infinity;
    if (running > best.max && t < to && next > from) best = { max: running, at: Math.max(t, from) };
  });
  return best;
}

/**
 * The most starts within any window [t, t + windowMs), sliding over the starts themselves (a
 * window holding the most starts can always be moved to begin at one), and where it begins.
 */
export function maxStartsInWindow(starts: readonly number[], windowMs: number): { max: number; at: number | null } {
  const sorted = [...starts].sort((x, y) => x - y);
  let best = { max: 0, at: null as number | null };
  let end = 0;
  for (let i = 0; i < sorted.length; i++) {
    while (end < sorted.length && sorted[end] < sorted[i] + windowMs) end++;
    if (end - i > best.max) best = { max: end - i, at: sorted[i] };
  }
  return best;
}

/** Outcomes that end a job for good: its lane moves on after one of these only. */
const FINAL = new Set(['succeeded', 'failed_final']);

/**
 * What breaks the lane rule (docs/DESIGN.md, "Policies": lanes), one line per break, for every
 * lane among `attempts`: taken in claim order, a lane's attempts never overlap (each is claimed at
 * or after the previous one's end), follow job id order (a job's retries come before the next
 * job's first attempt), and the lane passes to the next job only after the job before it ended
 * for good.
 */
export function laneBreaks(attempts: readonly Attempt[]): string[] {
  const breaks: string[] = [];
  const byLane = new Map<string, Attempt[]>();
  for (const a of attempts) if (a.lane !== null) byLane.set(a.lane, [...(byLane.get(a.lane) ?? []), a]);
  for (const [lane, list] of byLane) {
    const sorted = [...list].sort((x, y) => x.claimedAt - y.claimedAt);
    for (let i = 1; i < sorted.length; i++) {
      const prev = sorted[i - 1];
      const next = sorted[i];
      const what = `lane ${lane}: job ${next.jobId} execution ${next.execution} after job ${prev.jobId} execution ${prev.execution} (${prev.outcome})`;
      if (next.claimedAt < prev.finishedAt) breaks.push(`${what}: claimed ${(prev.finishedAt - next.claimedAt).toFixed(3)} ms before it ended`);
      if (BigInt(next.jobId) < BigInt(prev.jobId)) breaks.push(`${what}: out of enqueue order`);
      if (BigInt(next.jobId) > BigInt(prev.jobId) && !FINAL.has(prev.outcome)) breaks.push(`${what}: the lane moved on before its head ended for good`);
    }
  }
  return breaks;
}
