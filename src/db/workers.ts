import type { Queryable } from './Db';
import type { DeclaredPolicy, HeartbeatArgs, HeartbeatResult, PassSchedule, RegisterArgs } from './types';

/**
 * A worker the membership list has alive is live while its last beat is within 7 H (1.75 of its
 * lease, migration 0022): past that it is gone, though only a live worker's recovery pass marks it
 * dead, so when every worker crashed their rows stay alive (test/db/why.test.ts, "workers that
 * stopped beating"). A row without its lease (registered before 0022) counts as live. A condition
 * on `acta.workers w`: acta why and listWorkers judge by it alike (docs/operating.md, "acta workers").
 */
export const WORKER_LIVE_SQL = `(w.lease_ms is null or w.last_heartbeat_at >= now() - w.lease_ms * interval '1.75 millisecond')`;

/** The passes every worker runs when none are named: the recovery pass, every lease (docs/DESIGN.md, "The lease clock"). */
const recoveryOnly = (leaseMs: number): PassSchedule[] => [{ name: 'recovery', intervalMs: leaseMs }];

/** acta.heartbeat: renew every held pair in one call, and take the worker's passes that are due (default: recovery, every `leaseMs`). */
export async function heartbeat(
  q: Queryable,
  args: HeartbeatArgs,
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
  const out: HeartbeatResult = { renewed: [], locked: [], lost: [], cancel: [], duePasses: [] };
  for (const r of rows) {
    if (r.job_id === null) {
      if (r.state.startsWith('pass:')) out.duePasses.push(r.state.slice('pass:'.length));
      else if (r.state.startsWith('policy:')) out.policyVersion = Number(r.state.slice('policy:'.length));
      continue;
    }
    const pair = byKey.get(`${r.job_id}:${r.execution}`);
    if (pair) out[r.state as 'renewed' | 'locked' | 'lost' | 'cancel'].push(pair);
  }
  return out;
}

/**
 * acta.register_worker: the worker, its build and its definitions' policies (`maxAttempts[i]`
 * belongs to `definitions[i]`; null or absent: the default; `policies` by definition name: the
 * declarations acta.refresh_definitions reconciles across the namespace's live workers; migrations
 * 0004 and 0008). The registration is the worker's first beat: `duePasses` are the passes it took
 * (due, among the worker's `passes`; default: recovery, every `leaseMs`), which the caller then runs.
 */
export async function registerWorker(q: Queryable, args: RegisterArgs): Promise<{ duePasses: string[] }> {
  const passes = args.passes ?? recoveryOnly(args.leaseMs);
  const { rows } = await q.query<{ due: string[] | null }>('select acta.register_worker($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) as due', [
    args.workerId,
    args.namespace,
    args.hostname,
    args.pid,
    args.definitions,
    args.maxAttempts ?? args.definitions.map(() => null),
    passes.map((p) => p.name),
    passes.map((p) => p.intervalMs),
    args.build ?? null,
    args.policies ? JSON.stringify(args.policies) : null,
    args.leaseMs,
  ]);
  return { duePasses: rows[0]?.due ?? [] };
}

/** One definition's policy as the namespace applies it now (acta.definitions; acta.refresh_definitions). */
export interface AppliedPolicy {
  name: string;
  maxAttempts: number | null;
  timeoutMs: number | null;
  /** The backoff of the declaration that applies: an object, 'function' (the worker's own function), or null (the default). */
  backoff: DeclaredPolicy['backoff'];
  concurrencyLimit: number | null;
  rateLimit: number | null;
  ratePerMs: number | null;
  fair: boolean;
  /** The build whose declaration applies (null: not declared). */
  build: string | null;
}

/** The namespace's policy version and the applied policies of `names`, in one statement. */
export async function loadPolicies(q: Queryable, namespace: string, names: string[]): Promise<{ version: number; policies: AppliedPolicy[] }> {
  const { rows } = await q.query<{
    version: string;
    name: string | null;
    max_attempts: number | null;
    timeout_ms: number | null;
    backoff: DeclaredPolicy['backoff'];
    concurrency_limit: number | null;
    rate_limit: number | null;
    rate_per_ms: number | null;
    fair: boolean | null;
    build: string | null;
  }>(
    `select n.policy_version::text as version, d.name, d.max_attempts, d.timeout_ms, d.policy -> 'backoff' as backoff,
            d.concurrency_limit, d.rate_limit, d.rate_per_ms, d.fair, d.build
       from acta.namespaces n
       left join acta.definitions d on d.namespace = n.name and d.name = any ($2)
      where n.name = $1`,
    [namespace, names],
  );
  return {
    version: Number(rows[0]?.version ?? 0),
    policies: rows
      .filter((r) => r.name !== null)
      .map((r) => ({
        name: r.name as string,
        maxAttempts: r.max_attempts,
        timeoutMs: r.timeout_ms,
        backoff: r.backoff ?? null,
        concurrencyLimit: r.concurrency_limit,
        rateLimit: r.rate_limit,
        ratePerMs: r.rate_per_ms,
        fair: r.fair === true,
        build: r.build,
      })),
  };
}

/** acta.stop_worker. */
export async function stopWorker(q: Queryable, workerId: string): Promise<void> {
  await q.query('select acta.stop_worker($1)', [workerId]);
}
