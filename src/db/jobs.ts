import { PIPELINE } from '../config';
import { runStatement } from './call';
import type { Db, Queryable } from './Db';
import type { CancelAnswer, ClaimArgs, ClaimResult, JobId, JobRecord, JobStatus, ExecutionOutcome, RecoveredRow, StoredError } from './types';

export interface EnqueueRows {
  definitions: string[];
  /** JSON texts, already checked by toJsonText. */
  payloads: string[];
  priorities: (number | null)[];
  runAts: (Date | null)[];
  maxAttempts: (number | null)[];
  idempotencyKeys: (string | null)[];
  /** The policy keys of each job (docs/DESIGN.md, "Policies"); absent or null: none. */
  concurrencyKeys?: (string | null)[];
  rateKeys?: (string | null)[];
  lanes?: (string | null)[];
  /**
   * The elements to check against the namespace's stored definitions (src/policies/enqueueRule.ts:
   * those whose client has no definition of them); absent: none. A refused one: SQLSTATE AC001.
   */
  checks?: boolean[];
}

/** `values`, or null when every element is null (enqueue_jobs reads a null array as all-null elements). */
export function unlessAllNull<T>(values: (T | null)[]): (T | null)[] | null {
  return values.every((v) => v === null) ? null : values;
}

/**
 * acta.enqueue_jobs: one result per input element, in order (id null: see the key race in
 * client.ts). On a Db, a named statement, planned once per connection
 * (docs/decisions/2026-12-01-prepared-statements.md; test/db/prepared.test.ts). On a
 * PostgreSQL server's Db (outside any transaction) it is acta.enqueue_jobs_wake_early: workers
 * are woken before the commit's WAL flush, and the call still returns only after it
 * (sql/functions/enqueue_jobs_wake_early.sql). In a caller's transaction, and on PGlite (one in-process
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
    rows.concurrencyKeys ? unlessAllNull(rows.concurrencyKeys) : null,
    rows.rateKeys ? unlessAllNull(rows.rateKeys) : null,
    rows.lanes ? unlessAllNull(rows.lanes) : null,
    rows.checks?.some((c) => c) ? rows.checks : null,
  ];
  const [name, text] =
    (q as Partial<Db>).kind === 'postgres'
      ? ['acta_enqueue_jobs_wake_early', 'call acta.enqueue_jobs_wake_early($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11, null, null)']
      : ['acta_enqueue_jobs', 'select ids, created from acta.enqueue_jobs($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10, $11)'];
  const result = await runStatement<{ ids: string; created: string }>(q, name, text, params);
  const { ids, created } = result.rows[0];
  return ids.split(',').map((id, i) => ({ id: id === '' ? null : id, created: created[i] === 't' }));
}

/** acta.claim_jobs. */
export async function claimJobs(
  q: Queryable,
  args: ClaimArgs,
): Promise<ClaimResult> {
  const { rows } = await runStatement<{
    job_id: string | null;
    definition: string;
    payload: unknown;
    execution: number;
    attempts: number;
    own_max_attempts: number | null;
    uncharged_returns: number;
    priority: number;
    next_due_in_ms: number | null;
    schedule: { name: string; at: string; claimedAt: string; cron?: string; timeZone?: string; catchUp?: 'latest' | 'all' | 'none'; catchUpWindowMs?: number | null; armed?: boolean } | null;
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
      ...(r.schedule === null ? {} : { schedule: { ...r.schedule, at: new Date(r.schedule.at), claimedAt: new Date(r.schedule.claimedAt) } }),
    })),
    nextDueInMs: null,
  };
}

/** acta.recover_jobs: one recovery pass (up to `limit` rows). */
export async function recoverJobs(q: Queryable, args: { namespace: string; deadAfterMs: number; limit?: number }): Promise<RecoveredRow[]> {
  const { rows } = await q.query<{ job_id: string; execution: number; status: 'ready' | 'failed'; charged: boolean }>(
    'select * from acta.recover_jobs($1, $2, $3)',
    [args.namespace, args.deadAfterMs, args.limit ?? 10_000],
  );
  return rows.map((r) => ({ id: r.job_id, execution: r.execution, status: r.status, charged: r.charged }));
}

/** The statuses acta_jobs counts (src/worker/metrics.ts): those a job waits or runs in. */
export type DepthStatus = 'ready' | 'waiting' | 'executing';
/** Jobs of one definition in one status, as countJobs reads them. */
export interface JobCount {
  definition: string;
  status: DepthStatus;
  count: number;
}

/**
 * The namespace's Ready, Waiting and Executing jobs by definition, each status counted up to `cap`
 * (its jobs in id order: past the cap, the split by definition is the oldest ones'), in one
 * statement along indexes: jobs_list_idx (namespace, status, id) for Ready and Waiting, jobs_lease_idx
 * for Executing (test/db/jobsMetric.test.ts reads the plan). Cost: the rows counted, heap included.
 */
export async function countJobs(q: Queryable, namespace: string, cap: number): Promise<JobCount[]> {
  const by = (status: DepthStatus, where: string) =>
    `select '${status}' as status, c.definition, count(*)::integer as count
       from (select j.definition from acta.jobs j where j.namespace = $1 and ${where} order by j.id limit $2) c group by c.definition`;
  const { rows } = await q.query<JobCount>(
    [by('ready', `j.status = 'ready'`), by('waiting', `j.status = 'waiting'`), by('executing', `j.status = 'executing' and j.lease_expires_at is not null`)].join('\nunion all\n'),
    [namespace, cap],
  );
  return rows.map((r) => ({ definition: r.definition, status: r.status, count: Number(r.count) }));
}

/**
 * The attempt limit that applies to a job: its own, else its definition's (acta.definitions), else
 * 25, as recovery applies it (sql/functions/recover_jobs.sql; docs/decisions/2026-11-30-max-attempts-own-else-definition.md).
 */
export function attemptLimit(own: number | null, definition: number | null | undefined): Pick<JobRecord, 'effectiveMaxAttempts' | 'maxAttemptsFrom'> {
  if (own !== null) return { effectiveMaxAttempts: own, maxAttemptsFrom: 'job' };
  if (definition !== null && definition !== undefined) return { effectiveMaxAttempts: definition, maxAttemptsFrom: 'definition' };
  return { effectiveMaxAttempts: PIPELINE.maxAttempts, maxAttemptsFrom: 'default' };
}

/** A job's definition's attempt limit as a column (definition_max_attempts) of a statement over `acta.jobs j`. */
export const DEFINITION_MAX_ATTEMPTS_SQL = `(select d.max_attempts from acta.definitions d where d.namespace = j.namespace and d.name = j.definition) as definition_max_attempts`;

/** The fields every view of a job shares (readJob, the dashboard's job page), from the row's column names. */
export type JobHeader = Pick<JobRecord, 'id' | 'definition' | 'status' | 'attempts' | 'maxAttempts' | 'effectiveMaxAttempts' | 'maxAttemptsFrom' | 'execution' | 'priority' | 'runAt' | 'createdAt' | 'finishedAt' | 'idempotencyKey' | 'concurrencyKey' | 'rateKey' | 'lane' | 'cancelRequestedAt'>;

export function jobHeader(r: { id: string; definition: string; status: JobStatus; attempts: number; max_attempts: number | null; definition_max_attempts: number | null; execution: number; priority: number; run_at: Date; created_at: Date; finished_at: Date | null; idempotency_key: string | null; concurrency_key: string | null; rate_key: string | null; lane: string | null; cancel_requested_at: Date | null }): JobHeader {
  return {
    id: r.id,
    definition: r.definition,
    status: r.status,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    ...attemptLimit(r.max_attempts, r.definition_max_attempts),
    execution: r.execution,
    priority: r.priority,
    runAt: r.run_at,
    createdAt: r.created_at,
    finishedAt: r.finished_at,
    idempotencyKey: r.idempotency_key,
    concurrencyKey: r.concurrency_key,
    rateKey: r.rate_key,
    lane: r.lane,
    cancelRequestedAt: r.cancel_requested_at,
  };
}

/** The finished attempts readJob returns, and the dashboard's job page shows: the newest (a job retried without end has thousands). */
export const EXECUTIONS_SHOWN = 100;

/**
 * One job of `namespace` and its newest EXECUTIONS_SHOWN finished attempts with their count, in one
 * statement; null when no such job.
 * The attempts travel as one json array (their times as ISO text) and are decoded here.
 * blockedBy is read for a Ready row only: a parked row that was cancelled keeps its blocked_by
 * (acta.cancel_job leaves it), and is no longer waiting for anything.
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
    definition_max_attempts: number | null;
    execution: number;
    priority: number;
    run_at: Date;
    created_at: Date;
    finished_at: Date | null;
    idempotency_key: string | null;
    concurrency_key: string | null;
    rate_key: string | null;
    lane: string | null;
    blocked_by: JobRecord['blockedBy'];
    progress: unknown;
    cancel_requested_at: Date | null;
    schedule: string | null;
    scheduled_at: Date | null;
    executions: { execution: number; worker_id: string | null; claimed_at: string; finished_at: string; outcome: ExecutionOutcome; charged: boolean; error: StoredError | null }[];
    execution_count: number;
  }>(
    `select j.id::text as id, j.definition, j.status, j.payload, j.result, j.error, j.attempts, j.max_attempts, ${DEFINITION_MAX_ATTEMPTS_SQL},
            j.execution, j.priority, j.run_at, j.created_at, j.finished_at, j.idempotency_key,
            j.concurrency_key, j.rate_key, j.lane, case when j.status = 'ready' then j.blocked_by end as blocked_by,
            j.progress, j.cancel_requested_at, j.schedule, j.scheduled_at,
            coalesce((select json_agg(json_build_object(
                               'execution', e.execution, 'worker_id', e.worker_id, 'claimed_at', e.claimed_at,
                               'finished_at', e.finished_at, 'outcome', e.outcome, 'charged', e.charged, 'error', e.error)
                             order by e.execution)
                      from (select * from acta.all_executions e where e.job_id = j.id order by e.execution desc limit ${EXECUTIONS_SHOWN}) e), '[]'::json) as executions,
            (select count(*)::int from acta.all_executions e where e.job_id = j.id) as execution_count
       from acta.all_jobs j
      where j.id = $1::bigint and j.namespace = $2`,
    [id, namespace],
  );
  if (rows.length === 0) return null;
  const r = rows[0];
  return {
    ...jobHeader(r),
    payload: r.payload,
    result: r.result,
    error: r.error,
    blockedBy: r.blocked_by,
    progress: r.progress,
    schedule: r.schedule,
    scheduledAt: r.scheduled_at,
    executions: r.executions.map((e) => ({
      execution: e.execution,
      workerId: e.worker_id,
      claimedAt: new Date(e.claimed_at),
      finishedAt: new Date(e.finished_at),
      outcome: e.outcome,
      charged: e.charged,
      error: e.error,
    })),
    executionCount: r.execution_count,
  };
}

/**
 * acta.cancel_job: cancels one job of `namespace`: a Ready one (queued, due later, waiting out a
 * retry's backoff, or parked on a gate) at once ('cancelled'; a cancelled lane head hands its lane
 * on); an Executing one through its worker ('requested': its handler is aborted, and the job ends
 * Cancelled unless it succeeds first). null when there is no such job or it has finished.
 */
export async function cancelJob(q: Queryable, namespace: string, id: string): Promise<CancelAnswer> {
  const { rows } = await q.query<{ answer: CancelAnswer }>('select acta.cancel_job($1, $2::bigint) as answer', [namespace, id]);
  return rows[0]?.answer ?? null;
}

/** acta.watch_job: marks the job observed (its changes then send NOTIFY acta_job); false when the namespace has no such job. */
export async function watchJob(q: Queryable, namespace: string, id: string): Promise<boolean> {
  const { rows } = await q.query<{ found: boolean }>('select acta.watch_job($1, $2::bigint) as found', [namespace, id]);
  return rows[0]?.found === true;
}

/**
 * Why a namespace has no job `id` (client.observe / client.result, JobDeletedError): `retentionZero`
 * the namespace deletes a job at its success, as acta.complete_executions reads it (its
 * sys.retention schedule, not paused, payload succeededMs 0); `issued` the job id sequence has
 * reached `id` (an id never issued had no job anywhere).
 */
export async function readAbsence(q: Queryable, namespace: string, id: string): Promise<{ retentionZero: boolean; issued: boolean }> {
  const { rows } = await q.query<{ retention_zero: boolean; issued: boolean }>(
    `select exists (select 1 from acta.schedules s
                    where s.namespace = $1 and s.name = 'sys.retention' and not s.paused and s.payload -> 'succeededMs' = '0'::jsonb) as retention_zero,
            coalesce($2::bigint <= (select q.last_value from acta.jobs_id_seq q where q.is_called), false) as issued`,
    [namespace, id],
  );
  return { retentionZero: rows[0]?.retention_zero === true, issued: rows[0]?.issued === true };
}

/** One attempt's latest progress, as acta.report_progress takes it: the value as JSON text. */
export interface ProgressRow {
  id: JobId;
  execution: number;
  json: string;
}

/** acta.report_progress: the batch in one call; how many rows took their value (the others were fenced out). */
export async function reportProgress(q: Queryable, workerId: string, rows: ProgressRow[]): Promise<number> {
  const { rows: out } = await q.query<{ n: number }>('select acta.report_progress($1, $2, $3, $4::jsonb) as n', [
    workerId,
    rows.map((r) => r.id),
    rows.map((r) => r.execution),
    `[${rows.map((r) => r.json).join(',')}]`,
  ]);
  return out[0]?.n ?? 0;
}
