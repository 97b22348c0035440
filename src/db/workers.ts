import type { Queryable } from './Db';
import type { HeartbeatResult, HeldPair, PassSchedule } from './types';

/** The passes every worker runs when none are named: the recovery pass, every lease (docs/DESIGN.md, "The lease clock"). */
const recoveryOnly = (leaseMs: number): PassSchedule[] => [{ name: 'recovery', intervalMs: leaseMs }];

/** acta.heartbeat: renew every held pair in one call, and take the worker's passes that are due (default: recovery, every `leaseMs`). */
export async function heartbeat(
  q: Queryable,
  args: { workerId: string; namespace: string; held: HeldPair[]; leaseMs: number; passes?: PassSchedule[] },
): Promise<HeartbeatResult> {
  const passes = args.passes ?? recoveryOnly(args.leaseMs);
  const { rows } = await q.query<{ job_id: string | null; execution: number | null; state: string }>('select * from acta.heartbeat($1, $2, $3, $4, $5, $6, $7, $8)', [
    args.workerId,
    args.namespace,
    args.held.map((h) => h.id),
    args.held.map((h) => h.execution),
    args.held.map((h) => h.started),
    args.leaseMs,
    passes.map((p) => p.name),
    passes.map((p) => p.intervalMs),
  ]);
  const byKey = new Map(args.held.map((h) => [`${h.id}:${h.execution}`, h]));
  const out: HeartbeatResult = { renewed: [], locked: [], lost: [], duePasses: [] };
  for (const r of rows) {
    if (r.state.startsWith('pass:')) {
      out.duePasses.push(r.state.slice('pass:'.length));
      continue;
    }
    const pair = byKey.get(`${r.job_id}:${r.execution}`);
    if (pair) out[r.state as 'renewed' | 'locked' | 'lost'].push(pair);
  }
  return out;
}

/**
 * acta.register_worker: the worker and its definitions' policies (`maxAttempts[i]` belongs to
 * `definitions[i]`; null or absent: the default), which recovery applies (migration 0004). The
 * registration is the worker's first beat: `duePasses` are the passes it took (due, among the
 * worker's `passes`; default: recovery, every `leaseMs`), which the caller then runs.
 */
export async function registerWorker(
  q: Queryable,
  args: { workerId: string; namespace: string; hostname: string; pid: number; definitions: string[]; maxAttempts?: (number | null)[]; leaseMs: number; passes?: PassSchedule[] },
): Promise<{ duePasses: string[] }> {
  const passes = args.passes ?? recoveryOnly(args.leaseMs);
  const { rows } = await q.query<{ due: string[] | null }>('select acta.register_worker($1, $2, $3, $4, $5, $6, $7, $8) as due', [
    args.workerId,
    args.namespace,
    args.hostname,
    args.pid,
    args.definitions,
    args.maxAttempts ?? args.definitions.map(() => null),
    passes.map((p) => p.name),
    passes.map((p) => p.intervalMs),
  ]);
  return { duePasses: rows[0]?.due ?? [] };
}

/** acta.stop_worker. */
export async function stopWorker(q: Queryable, workerId: string): Promise<void> {
  await q.query('select acta.stop_worker($1)', [workerId]);
}
