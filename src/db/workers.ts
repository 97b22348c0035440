import type { Queryable } from './Db';
import type { HeartbeatResult, HeldPair } from './types';

/** acta.heartbeat: renew every held pair in one call. */
export async function heartbeat(
  q: Queryable,
  args: { workerId: string; namespace: string; held: HeldPair[]; leaseMs: number },
): Promise<HeartbeatResult> {
  const { rows } = await q.query<{ job_id: string | null; execution: number | null; state: string }>(
    'select * from acta.heartbeat($1, $2, $3, $4, $5, $6)',
    [args.workerId, args.namespace, args.held.map((h) => h.id), args.held.map((h) => h.execution), args.held.map((h) => h.started), args.leaseMs],
  );
  const byKey = new Map(args.held.map((h) => [`${h.id}:${h.execution}`, h]));
  const out: HeartbeatResult = { renewed: [], locked: [], lost: [], recoveryDue: false };
  for (const r of rows) {
    if (r.state === 'recovery_due') {
      out.recoveryDue = true;
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
 * registration is the worker's first beat: `recoveryDue` is true when it took the namespace's
 * recovery pass (due, by the worker's lease `leaseMs`), which the caller then runs.
 */
export async function registerWorker(
  q: Queryable,
  args: { workerId: string; namespace: string; hostname: string; pid: number; definitions: string[]; maxAttempts?: (number | null)[]; leaseMs: number },
): Promise<{ recoveryDue: boolean }> {
  const { rows } = await q.query<{ recovery_due: boolean | null }>('select acta.register_worker($1, $2, $3, $4, $5, $6, $7) as recovery_due', [
    args.workerId,
    args.namespace,
    args.hostname,
    args.pid,
    args.definitions,
    args.maxAttempts ?? args.definitions.map(() => null),
    args.leaseMs,
  ]);
  return { recoveryDue: rows[0]?.recovery_due === true };
}

/** acta.stop_worker. */
export async function stopWorker(q: Queryable, workerId: string): Promise<void> {
  await q.query('select acta.stop_worker($1)', [workerId]);
}
