import type { Db, Queryable } from './Db';

/** `q.prepared` when `q` is a Db (the worker's own calls), else `q.query` (a transaction, a caller's client). */
function run<R>(q: Queryable, name: string, text: string, params: unknown[]): Promise<{ rows: R[] }> {
  const db = q as Partial<Db>;
  return typeof db.prepared === 'function' ? db.prepared<R>(name, text, params) : q.query<R>(text, params);
}

/**
 * Typed wrappers of the SQL functions in sql/functions/, one round trip each. `SIGNATURES` holds
 * each function's identity arguments as the catalog prints them
 * (`pg_get_function_identity_arguments`); a test holds them against the live catalog.
 */
export const SIGNATURES = {
  enqueue_jobs:
    'p_namespace text, p_definitions text[], p_payloads jsonb, p_priorities integer[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_idempotency_keys text[]',
  enqueue_jobs_wake_early:
    'IN p_namespace text, IN p_definitions text[], IN p_payloads jsonb, IN p_priorities integer[], IN p_run_ats timestamp with time zone[], IN p_max_attempts integer[], IN p_idempotency_keys text[], INOUT ids text, INOUT created text',
  wal_message_allowed: 'p_args integer',
  claim_jobs: 'p_namespace text, p_worker uuid, p_definitions text[], p_limit integer, p_lease_ms integer',
  complete_executions:
    'p_worker uuid, p_ids bigint[], p_executions integer[], p_outcomes text[], p_results jsonb[], p_errors jsonb[], p_retry_delays_ms integer[]',
  heartbeat: 'p_worker uuid, p_namespace text, p_ids bigint[], p_executions integer[], p_started boolean[], p_lease_ms integer',
  recover_jobs: 'p_namespace text, p_dead_after_ms integer, p_limit integer',
  register_worker: 'p_worker uuid, p_namespace text, p_hostname text, p_pid integer, p_definitions text[], p_max_attempts integer[], p_lease_ms integer',
  take_recovery_pass: 'p_namespace text, p_lease_ms integer',
  release_recovery_pass: 'p_namespace text',
  stop_worker: 'p_worker uuid',
  refresh_definitions: 'p_namespace text, p_names text[]',
  record_step: 'p_worker uuid, p_job_id bigint, p_execution integer, p_name text, p_result jsonb',
} as const;

/** Job ids are PostgreSQL bigint, carried as decimal strings (pg returns int8 as string). */
export type JobId = string;

export interface EnqueueRows {
  definitions: string[];
  /** JSON texts, already checked by toJsonText. */
  payloads: string[];
  priorities: (number | null)[];
  runAts: (Date | null)[];
  maxAttempts: (number | null)[];
  idempotencyKeys: (string | null)[];
}

/** `values`, or null when every element is null (enqueue_jobs reads a null array as all-null elements). */
function unlessAllNull<T>(values: (T | null)[]): (T | null)[] | null {
  return values.every((v) => v === null) ? null : values;
}

/**
 * acta.enqueue_jobs: one result per input element, in order (id null: see the key race in
 * client.ts). On a Db, a named statement: a single-job enqueue took 1.74 against 1.88 ms (p50 of
 * 200 interleaved calls 15 ms apart, durable commit included; issue 5's latency path). On a
 * PostgreSQL server's Db (outside any transaction) it is acta.enqueue_jobs_wake_early: workers
 * are woken before the commit's WAL flush, and the call still returns only after it
 * (sql/functions/jobs_enqueue.sql). In a caller's transaction, and on PGlite (one in-process
 * session: no flush to overlap), the function itself.
 */
export async function enqueueJobs(q: Queryable, namespace: string, rows: EnqueueRows): Promise<{ id: JobId | null; created: boolean }[]> {
  const params = [
    namespace,
    rows.definitions,
    `[${rows.payloads.join(',')}]`,
    unlessAllNull(rows.priorities),
    unlessAllNull(rows.runAts),
    unlessAllNull(rows.maxAttempts),
    unlessAllNull(rows.idempotencyKeys),
  ];
  const [name, text] =
    (q as Partial<Db>).kind === 'postgres'
      ? ['acta_enqueue_jobs_wake_early', 'call acta.enqueue_jobs_wake_early($1, $2, $3::jsonb, $4, $5, $6, $7, null, null)']
      : ['acta_enqueue_jobs', 'select ids, created from acta.enqueue_jobs($1, $2, $3::jsonb, $4, $5, $6, $7)'];
  const result = await run<{ ids: string; created: string }>(q, name, text, params);
  const { ids, created } = result.rows[0];
  return ids.split(',').map((id, i) => ({ id: id === '' ? null : id, created: created[i] === 't' }));
}

/** A row as the claim returns it. */
export interface ClaimedRow {
  id: JobId;
  definition: string;
  payload: unknown;
  execution: number;
  attempts: number;
  /** The job's own maxAttempts, given at enqueue; null: its definition's (migration 0004). */
  maxAttempts: number | null;
  /** Returns of this job so far that cost no attempt (recovery's, and expired claims': PIPELINE.unchargedReturnsMax). */
  unchargedReturns: number;
  priority: number;
}

export interface ClaimResult {
  rows: ClaimedRow[];
  /** Only when nothing was claimed: ms until the next row of these definitions is due (null: none). */
  nextDueInMs: number | null;
}

/** acta.claim_jobs. */
export async function claimJobs(
  q: Queryable,
  args: { namespace: string; workerId: string; definitions: string[]; limit: number; leaseMs: number },
): Promise<ClaimResult> {
  const { rows } = await run<{
    job_id: string | null;
    definition: string;
    payload: unknown;
    execution: number;
    attempts: number;
    own_max_attempts: number | null;
    uncharged_returns: number;
    priority: number;
    next_due_in_ms: number | null;
  }>(q, 'acta_claim_jobs', 'select * from acta.claim_jobs($1, $2, $3, $4, $5)', [args.namespace, args.workerId, args.definitions, args.limit, args.leaseMs]);
  if (rows.length === 1 && rows[0].job_id === null) return { rows: [], nextDueInMs: rows[0].next_due_in_ms };
  return {
    rows: rows.map((r) => ({
      id: r.job_id as string,
      definition: r.definition,
      payload: r.payload,
      execution: r.execution,
      attempts: r.attempts,
      maxAttempts: r.own_max_attempts,
      unchargedReturns: r.uncharged_returns,
      priority: r.priority,
    })),
    nextDueInMs: null,
  };
}

/** The shapes a completion can take (sql/functions/executions_complete.sql). */
export type CompletionOutcome = 'succeeded' | 'failed' | 'failed_final' | 'handed_back' | 'expired';

export interface CompletionRow {
  id: JobId;
  execution: number;
  outcome: CompletionOutcome;
  /** JSON text of the result (succeeded) or null. */
  result: string | null;
  /** JSON text of the error (failed*) or null. */
  error: string | null;
  /** Back-off before the retry, ms (failed only). */
  retryDelayMs: number;
}

/** New status per element, or 'stale' when the fence rejected it. */
export interface CompletionAck {
  id: JobId;
  execution: number;
  status: 'succeeded' | 'failed' | 'ready' | 'stale';
}

/** The largest PostgreSQL `integer` (int4). */
export const INT4_MAX = 2_147_483_647;

/** complete_executions' answer letters (sql/functions/executions_complete.sql). */
const ACK_STATUS: Record<string, CompletionAck['status']> = { s: 'succeeded', f: 'failed', r: 'ready', x: 'stale' };

/**
 * acta.complete_executions: the whole batch in one call; acks in batch order. A retry delay is
 * sent clamped to 0..2^31-1 ms (a non-finite one as 0): the column is an integer, and an
 * out-of-range value would fail the batch's statement.
 * Encoding (issue 5): ids, executions and outcomes go as array literals joined here (decimal
 * digits and fixed words: nothing to quote), and the results, errors and delays as a null array
 * when no element has one (the function reads a null array as all-null elements, a null delay as
 * 0). Against the driver quoting every element (issue 5, 128-row batches of successes whose
 * handlers returned nothing, i.e. result texts 'null'): 0.14 against 0.50 us of client CPU per
 * element to encode; the server's CPU per element the same within its noise (13.0 against 13.2 us,
 * backend CPU from /proc/<pid>/schedstat, 10 interleaved rounds of 60 calls). Too small for a whole
 * drain to tell apart (bench/README.md, session of 2026-12-01, afternoon).
 */
export async function completeExecutions(q: Queryable, workerId: string, batch: CompletionRow[]): Promise<CompletionAck[]> {
  const n = batch.length;
  const ids = new Array<string>(n);
  const executions = new Array<number>(n);
  const outcomes = new Array<string>(n);
  const results = new Array<string | null>(n);
  const errors = new Array<string | null>(n);
  const delays = new Array<number>(n);
  let anyResult = false;
  let anyError = false;
  let anyDelay = false;
  for (let i = 0; i < n; i++) {
    const c = batch[i];
    ids[i] = c.id;
    executions[i] = c.execution;
    outcomes[i] = c.outcome;
    results[i] = c.result;
    errors[i] = c.error;
    const delay = Number.isFinite(c.retryDelayMs) ? Math.min(INT4_MAX, Math.max(0, Math.round(c.retryDelayMs))) : 0;
    delays[i] = delay;
    anyResult ||= c.result !== null;
    anyError ||= c.error !== null;
    anyDelay ||= delay !== 0;
  }
  const { rows } = await run<{ answer: string }>(q, 'acta_complete_executions', 'select acta.complete_executions($1, $2, $3, $4, $5::jsonb[], $6::jsonb[], $7) as answer', [
    workerId,
    `{${ids.join(',')}}`,
    `{${executions.join(',')}}`,
    `{${outcomes.join(',')}}`,
    anyResult ? results : null,
    anyError ? errors : null,
    anyDelay ? delays : null,
  ]);
  const answer = rows[0]?.answer ?? '';
  if (answer.length !== batch.length) throw new Error(`complete_executions answered ${answer.length} statuses for ${batch.length} completions`);
  return batch.map((c, i) => ({ id: c.id, execution: c.execution, status: ACK_STATUS[answer[i]] ?? 'stale' }));
}

export interface HeldPair {
  id: JobId;
  execution: number;
  started: boolean;
}

export interface HeartbeatResult {
  renewed: HeldPair[];
  locked: HeldPair[];
  lost: HeldPair[];
  /** This call took the namespace's recovery pass: run it now. */
  recoveryDue: boolean;
}

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

export interface RecoveredRow {
  id: JobId;
  execution: number;
  status: 'ready' | 'failed';
  charged: boolean;
}

/** acta.recover_jobs: one recovery pass (up to `limit` rows). */
export async function recoverJobs(q: Queryable, args: { namespace: string; deadAfterMs: number; limit?: number }): Promise<RecoveredRow[]> {
  const { rows } = await q.query<{ job_id: string; execution: number; status: 'ready' | 'failed'; charged: boolean }>(
    'select * from acta.recover_jobs($1, $2, $3)',
    [args.namespace, args.deadAfterMs, args.limit ?? 10_000],
  );
  return rows.map((r) => ({ id: r.job_id, execution: r.execution, status: r.status, charged: r.charged }));
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

/** acta.release_recovery_pass: the pass a registration took is due again at once (its worker stopped before running it). */
export async function releaseRecoveryPass(q: Queryable, namespace: string): Promise<void> {
  await q.query('select acta.release_recovery_pass($1)', [namespace]);
}

/** acta.stop_worker. */
export async function stopWorker(q: Queryable, workerId: string): Promise<void> {
  await q.query('select acta.stop_worker($1)', [workerId]);
}

/** What acta.record_step did. */
export interface StepRecord {
  status: 'recorded' | 'exists' | 'stale';
  /** The step's result as stored (null when stale). */
  result: unknown;
}

/** acta.record_step: record a step for the attempt (job, execution), fenced. `resultJson` is checked JSON text. */
export async function recordStep(
  q: Queryable,
  args: { workerId: string; jobId: JobId; execution: number; name: string; resultJson: string },
): Promise<StepRecord> {
  const { rows } = await q.query<{ status: StepRecord['status']; result: unknown }>(
    'select * from acta.record_step($1, $2, $3, $4, $5::jsonb)',
    [args.workerId, args.jobId, args.execution, args.name, args.resultJson],
  );
  return rows[0];
}

/** Every recorded step of a job: name → result. */
export async function loadSteps(q: Queryable, jobId: JobId): Promise<Map<string, unknown>> {
  const { rows } = await q.query<{ name: string; result: unknown }>('select name, result from acta.steps where job_id = $1', [jobId]);
  return new Map(rows.map((r) => [r.name, r.result]));
}
