/* The records the calls of src/db/ take and return, and the PostgreSQL bounds of their columns. */

import type { Jsonified } from '../json';

/** The brand a JobId<R> carries its result type in: a property of the type that no value has (type-only). */
declare const resultType: unique symbol;

/**
 * Job ids are PostgreSQL bigint, carried as decimal strings (pg returns int8 as string). `JobId<R>`:
 * the id of a job whose handler resolves `R`, as enqueue of a typed definition returns it; still a
 * string (the brand exists only in types), so it goes wherever a string does, and client.result,
 * observe and getJob read its result as `Jsonified<R>`. `JobId` (R unknown) is a plain string.
 */
export type JobId<R = unknown> = [R] extends [KnownResult] ? TypedJobId<R> : string;

/**
 * Every type but unknown: `[R] extends [KnownResult]` tells a result type from unknown with R on the
 * checked side, so that TypeScript sees JobId<R>, and EnqueueResult<R> with it, as covariant in R
 * (an EnqueueResult<R> is an EnqueueResult). `any` passes too; callers map it to unknown first.
 */
type KnownResult = object | string | number | boolean | bigint | symbol | null | undefined | void;

/** A JobId that carries its job's result type: `JobId<R>` of an R other than unknown (what an editor shows of one); `TypedJobId` alone: any of them. */
export type TypedJobId<R = unknown> = string & { readonly [resultType]: R };

/** The result type an id carries (JobId<R>'s `R`); unknown for an id without one. */
export type ResultTypeOfId<I> = I extends { readonly [resultType]: infer R } ? R : unknown;

/** The result an id's job resolves, in its JSON form (as read back from jsonb); unknown for an id without one. */
export type ResultOfId<I> = I extends unknown ? Jsonified<ResultTypeOfId<I>> : never;

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
  /** A schedule's fire (migration 0013): its instant and the schedule as claimed; absent for every other job. */
  schedule?: ClaimedFire | null;
}

/** A claimed fire of a schedule (acta.claim_jobs' `schedule`; docs/schedules.md). */
export interface ClaimedFire {
  name: string;
  /** The fire's scheduled instant. */
  at: Date;
  /** The claim's time, on the database clock: catch-up compares with it. */
  claimedAt: Date;
  /** The schedule as it is now; absent when it was removed. */
  cron?: string;
  timeZone?: string;
  catchUp?: 'latest' | 'all' | 'none';
  catchUpWindowMs?: number | null;
  /** The schedule's armed fire (false: a trigger's, or one detached by a change): only it arms the next. */
  armed?: boolean;
}

export interface ClaimResult {
  rows: ClaimedRow[];
  /** Only when nothing was claimed: ms until the next row of these definitions is due (null: none). */
  nextDueInMs: number | null;
}

/** The shapes a completion can take (sql/functions/complete_executions.sql). */
export type CompletionOutcome = 'succeeded' | 'failed' | 'failed_final' | 'handed_back' | 'expired' | 'rate_limited' | 'cancelled' | 'skipped' | 'signal_wait' | 'children_wait';

export interface CompletionRow {
  id: JobId;
  execution: number;
  outcome: CompletionOutcome;
  /** JSON text of the result (succeeded), of the wait (signal_wait, children_wait: src/workflows/wait.ts), or null. */
  result: string | null;
  /** JSON text of the error (failed*) or null. */
  error: string | null;
  /** Back-off before the retry, ms (failed), or until the rate meter opens (rate_limited). */
  retryDelayMs: number;
  /** A schedule's armed fire: the next instant to arm when it ends for good (docs/schedules.md). */
  nextFireAt?: Date | null;
}

/** New status per element, or 'stale' when the fence rejected it. */
export interface CompletionAck {
  id: JobId;
  execution: number;
  status: 'succeeded' | 'failed' | 'ready' | 'cancelled' | 'waiting' | 'stale';
}

/** The largest PostgreSQL `integer` (int4). */
export const INT4_MAX = 2_147_483_647;
/** The largest PostgreSQL `bigint` (int8): job ids are `bigint generated always as identity`. */
export const INT8_MAX = 2n ** 63n - 1n;

export interface HeldPair {
  id: JobId;
  execution: number;
  started: boolean;
}

export interface HeartbeatResult {
  renewed: HeldPair[];
  locked: HeldPair[];
  lost: HeldPair[];
  /** Renewed, and a client asked to cancel the job (acta.cancel_job): abort the attempt. */
  cancel: HeldPair[];
  /** The periodic passes this call took (acta.take_passes): run them now. */
  duePasses: string[];
  /** The namespace's policy version (acta.namespaces.policy_version): reload the policies when it moved. Absent: not reported. */
  policyVersion?: number;
}

/**
 * A definition's policy as a worker declares it at registration (acta.workers.policies; reconciled
 * across the namespace by acta.refresh_definitions): what src/definition.ts holds, without its
 * functions (a key function or a backoff function is only named).
 */
export interface DeclaredPolicy {
  maxAttempts: number | null;
  timeoutMs: number | null;
  /** An object backoff as declared; 'function' for a backoff function; null: the default. */
  backoff: { delayMs: number; factor?: number; maxDelayMs?: number } | 'function' | null;
  concurrency: { limit: number | null } | null;
  rate: { limit: number; perMs: number } | null;
  lane: boolean;
  fair: boolean;
  /** The definition's declared schedules (docs/schedules.md); absent: none. */
  schedules?: DeclaredSchedule[];
  /** The topics the definition subscribes to (docs/outbox.md); absent: none. */
  subscribe?: string[];
}

/** A schedule as declared on a definition and stored (acta.schedules; src/recurring/schedules.ts). */
export interface DeclaredSchedule {
  name: string;
  cron: string;
  timeZone: string;
  payload: unknown;
  catchUp: 'latest' | 'all' | 'none';
  catchUpWindowMs: number | null;
  /** Each fire's priority (claim order: higher first). */
  priority: number;
  /** Each fire's policy keys (migration 0021): given, else computed by the definition's functions; null: none. */
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
}

/** A periodic pass a worker runs, and its interval (sql/functions/take_passes.sql). */
export interface PassSchedule {
  name: string;
  intervalMs: number;
}

export interface RecoveredRow {
  id: JobId;
  execution: number;
  status: 'ready' | 'failed' | 'cancelled';
  charged: boolean;
}

/** What acta.cancel_job did: Cancelled a Ready job; requested an Executing job's cancellation; or nothing (no such job, or it has finished). */
export type CancelAnswer = 'cancelled' | 'requested' | null;

/** What acta.record_step did. */
export interface StepRecord {
  /** 'cancelled': a spawn's only (acta.spawn_children): the parent's cancel was requested, no child enqueued. */
  status: 'recorded' | 'exists' | 'stale' | 'cancelled';
  /** The step's result as stored (null when stale). */
  result: unknown;
}

/** `acta.jobs.status` (sql/migrations/0001_core.sql; docs/DESIGN.md, "The ledger"). */
export type JobStatus = 'ready' | 'executing' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';

/** `acta.executions.outcome`: CompletionOutcome (`cancelled`: the attempt's job was cancelled while it ran), or recovery's `lost` / `lost_uncharged` (sql/functions/recover_jobs.sql). */
export type ExecutionOutcome =
  | 'succeeded'
  | 'failed'
  | 'failed_final'
  | 'handed_back'
  | 'expired'
  | 'rate_limited'
  | 'cancelled'
  | 'skipped'
  | 'signal_wait'
  | 'children_wait'
  | 'lost'
  | 'lost_uncharged';

/** An error as acta stores it (src/worker/storedError.ts, errorJson): `code` and `path` only when the error had them. */
export interface StoredError {
  name: string;
  /** At most 65,536 characters (PIPELINE.errorTextMaxChars), as is `stack`. */
  message: string;
  code?: string | number;
  /** InvalidJsonError's path of the bad value, e.g. `$.items[3]`. */
  path?: string;
  stack?: string;
  /** The error's `cause` chain, 4 levels at most (src/worker/storedError.ts, NESTED_ERRORS). */
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

/** Where a job's effective attempt limit comes from (JobRecord.maxAttemptsFrom). */
export type MaxAttemptsFrom = 'job' | 'definition' | 'default';

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
  /**
   * The limit that applies: the job's own, else its definition's as acta.definitions holds it when
   * read (what recovery applies), else 25. docs/decisions/2026-11-30-max-attempts-own-else-definition.md
   */
  effectiveMaxAttempts: number;
  /** Where effectiveMaxAttempts comes from: the job's own, its definition's, or the default 25 (no limit declared, or the definition not declared). */
  maxAttemptsFrom: MaxAttemptsFrom;
  /** The fence: how many times the job has been claimed. */
  execution: number;
  priority: number;
  /** When the job is (or was last) due. */
  runAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
  idempotencyKey: string | null;
  /** The job's policy keys (docs/DESIGN.md, "Policies"), or null. */
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
  /**
   * A Ready job a claim refused waits parked for its gate: 'lane' (its lane's head runs or waits),
   * 'concurrency' (its key has no free slot), 'rate' (its meter has no token); null otherwise.
   */
  blockedBy: 'lane' | 'concurrency' | 'rate' | null;
  /** The last value a running attempt reported with `ctx.progress` (kept after the job ends), or null. */
  progress: unknown;
  /** When a client asked to cancel the job while it was Executing (it ends Cancelled unless it succeeds first), or null. */
  cancelRequestedAt: Date | null;
  /** A schedule's fire (docs/schedules.md): its schedule's name and its scheduled instant (ctx.scheduledAt); null for every other job. */
  schedule: string | null;
  scheduledAt: Date | null;
  /** The newest finished attempts (at most 100: EXECUTIONS_SHOWN, src/db/jobs.ts), in execution order; an attempt still running has no row yet. */
  executions: ExecutionRecord[];
  /** How many finished attempts the job has: more than `executions` holds when it was cut to the newest. */
  executionCount: number;
}

/** What a worker declares at registration (acta.register_worker; src/db/workers.ts registerWorker). */
export interface RegisterArgs {
  workerId: string;
  namespace: string;
  hostname: string;
  pid: number;
  definitions: string[];
  maxAttempts?: (number | null)[];
  leaseMs: number;
  passes?: PassSchedule[];
  build?: string | null;
  policies?: Record<string, DeclaredPolicy>;
}

/** One claim call (acta.claim_jobs). */
export interface ClaimArgs {
  namespace: string;
  workerId: string;
  definitions: string[];
  limit: number;
  leaseMs: number;
}

/** One heartbeat call (acta.heartbeat). */
export interface HeartbeatArgs {
  workerId: string;
  namespace: string;
  held: HeldPair[];
  leaseMs: number;
  passes?: PassSchedule[];
}
