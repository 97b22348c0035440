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
/** The largest PostgreSQL `bigint` (int8): job ids are `bigint generated always as identity`. */
export const INT8_MAX = 2n ** 63n - 1n;

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

/** `acta.jobs.status` (sql/migrations/0001_core.sql; shared/DESIGN.md, "The ledger"). */
export type JobStatus = 'ready' | 'executing' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';

/** `acta.executions.outcome`: CompletionOutcome, `failed_final`, or recovery's `lost` / `lost_uncharged` (sql/functions/jobs_recover.sql). */
export type ExecutionOutcome = 'succeeded' | 'failed' | 'failed_final' | 'handed_back' | 'expired' | 'lost' | 'lost_uncharged';

/** An error as acta stores it (src/storedError.ts, errorJson): `code` and `path` only when the error had them. */
export interface StoredError {
  name: string;
  /** At most 65,536 characters (PIPELINE.errorTextMaxChars), as is `stack`. */
  message: string;
  code?: string | number;
  /** InvalidJsonError's path of the bad value, e.g. `$.items[3]`. */
  path?: string;
  stack?: string;
  /** The error's `cause` chain, 4 levels at most (src/storedError.ts, NESTED_ERRORS). */
  cause?: NestedError;
  /** An AggregateError's first 10 errors, then `{ name: 'Omitted', message: '<n> more errors not stored' }`. */
  errors?: NestedError[];
}

/** A cause or an AggregateError's element as stored: texts of at most 4,096 characters; a non-Error cause is named `NonErrorCause`. */
export interface NestedError {
  name: string;
  message: string;
  code?: string | number;
  cause?: NestedError;
}

/** One finished attempt: a row of `acta.executions`, written once when the attempt ends. */
export interface ExecutionRecord {
  execution: number;
  /** The worker that held the attempt (null only for rows written without one). */
  workerId: string | null;
  /** Both on the database clock. */
  claimedAt: Date;
  finishedAt: Date;
  outcome: ExecutionOutcome;
  /** Whether the attempt counted against the job's maxAttempts. */
  charged: boolean;
  error: StoredError | null;
}

/** A job as `acta.jobs` holds it, with its finished attempts. Times are on the database clock. */
export interface JobRecord<P = unknown, R = unknown> {
  id: JobId;
  definition: string;
  status: JobStatus;
  payload: P;
  /** The handler's result (as stored: through jsonb), once Succeeded; else null. */
  result: R | null;
  /** The last failed attempt's error while the job is retried or Failed; null once it succeeded. */
  error: StoredError | null;
  /** Attempts charged so far. */
  attempts: number;
  /** The job's own limit; null: its definition's applies, else 25 (migration 0004). */
  maxAttempts: number | null;
  /** The fence: how many times the job has been claimed. */
  execution: number;
  priority: number;
  /** When the job is (or was last) due. */
  runAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
  idempotencyKey: string | null;
  /** Finished attempts in execution order; an attempt still running has no row yet. */
  executions: ExecutionRecord[];
}

/**
 * One job of `namespace` and its finished attempts, in one statement; null when no such job.
 * The attempts travel as one json array (their times as ISO text) and are decoded here.
 */
export async function readJob(q: Queryable, namespace: string, id: string): Promise<JobRecord | null> {
  const { rows } = await q.query<{
    id: string;
    definition: string;
    status: JobStatus;
    payload: unknown;
    result: unknown;
    error: StoredError | null;
    attempts: number;
    max_attempts: number | null;
    execution: number;
    priority: number;
    run_at: Date;
    created_at: Date;
    finished_at: Date | null;
    idempotency_key: string | null;
    executions: { execution: number; worker_id: string | null; claimed_at: string; finished_at: string; outcome: ExecutionOutcome; charged: boolean; error: StoredError | null }[];
  }>(
    `select j.id::text as id, j.definition, j.status, j.payload, j.result, j.error, j.attempts, j.max_attempts,
            j.execution, j.priority, j.run_at, j.created_at, j.finished_at, j.idempotency_key,
            coalesce((select json_agg(json_build_object(
                               'execution', e.execution, 'worker_id', e.worker_id, 'claimed_at', e.claimed_at,
                               'finished_at', e.finished_at, 'outcome', e.outcome, 'charged', e.charged, 'error', e.error)
                             order by e.execution)
                      from acta.executions e where e.job_id = j.id), '[]'::json) as executions
       from acta.jobs j
      where j.id = $1::bigint and j.namespace = $2`,
    [id, namespace],
  );
  if (rows.length === 0) return null;
  const r = rows[0];
  return {
    id: r.id,
    definition: r.definition,
    status: r.status,
    payload: r.payload,
    result: r.result,
    error: r.error,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    execution: r.execution,
    priority: r.priority,
    runAt: r.run_at,
    createdAt: r.created_at,
    finishedAt: r.finished_at,
    idempotencyKey: r.idempotency_key,
    executions: r.executions.map((e) => ({
      execution: e.execution,
      workerId: e.worker_id,
      claimedAt: new Date(e.claimed_at),
      finishedAt: new Date(e.finished_at),
      outcome: e.outcome,
      charged: e.charged,
      error: e.error,
    })),
  };
}

/**
 * Cancels one Ready job of `namespace` (queued, due later, or waiting out a retry's backoff): one
 * statement. True when this call moved it to Cancelled (finished at this statement's start on the
 * database clock, not its transaction's: in a caller's transaction now() could precede the job's
 * creation);
 * false when there is no such job or it is not Ready (Executing, finished, already Cancelled).
 * A claim holding the row's lock at that moment is waited for, and then the row is Executing: false.
 */
export async function cancelJob(q: Queryable, namespace: string, id: string): Promise<boolean> {
  const { rows } = await q.query(
    `update acta.jobs set status = 'cancelled', finished_at = statement_timestamp()
      where id = $1::bigint and namespace = $2 and status = 'ready'
      returning id`,
    [id, namespace],
  );
  return rows.length === 1;
}
