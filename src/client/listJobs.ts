/*
 * client.listJobs (docs/operating.md, "Admin operations"): a namespace's jobs newest first by keyset,
 * and the filter and the pick statement the bulk operations share (bulkOperations.ts).
 */
import { knownKeys, MAX_NAME_BYTES, nameOption, optionsOf } from '../config';
import { attemptLimit, DEFINITION_MAX_ATTEMPTS_SQL } from '../db/jobs';
import { INT8_MAX, type JobId, type JobStatus, type MaxAttemptsFrom } from '../db/types';
import { ConfigError } from '../errors';
import type { Admin, AdminContext } from './admin';

export const STATUSES: readonly JobStatus[] = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];
/** Rows a listing returns when not told (at most MAX_PAGE). */
const DEFAULT_PAGE = 50;
export const MAX_PAGE = 1_000;

/** Which jobs of a namespace: every field given must match. */
export interface JobFilter {
  /** Default: the client's namespace. */
  namespace?: string;
  /** One status or several (default: every status). */
  status?: JobStatus | JobStatus[];
  definition?: string;
  concurrencyKey?: string;
  lane?: string;
  /** created_at ≥ createdAfter and < createdBefore; finished_at likewise (a bound excludes unfinished jobs). */
  createdAfter?: Date;
  createdBefore?: Date;
  finishedAfter?: Date;
  finishedBefore?: Date;
}

/** A page of listJobs: newest first; `cursor` is the last one's id. */
export interface ListJobsOptions extends JobFilter {
  /** Rows in the page, 1 to 1,000 (default 50). */
  limit?: number;
  /** The `nextCursor` of the page before: this page starts below it. */
  cursor?: string | null;
}

/** A job as a listing shows it (no payload or result: getJob reads those). */
export interface JobSummary {
  id: JobId;
  namespace: string;
  definition: string;
  status: JobStatus;
  priority: number;
  attempts: number;
  /** The job's own limit (null: none given at enqueue). */
  maxAttempts: number | null;
  /** The limit that applies, and where it comes from: as getJob's (JobRecord). */
  effectiveMaxAttempts: number;
  maxAttemptsFrom: MaxAttemptsFrom;
  runAt: Date;
  createdAt: Date;
  finishedAt: Date | null;
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
  blockedBy: 'lane' | 'concurrency' | 'rate' | null;
  /** The worker holding it while Executing. */
  leaseHolder: string | null;
  /** The last error's message, at most 200 characters. */
  errorMessage: string | null;
}

export interface JobPage {
  jobs: JobSummary[];
  /** Pass as `cursor` for the next page; null: this was the last. */
  nextCursor: string | null;
}

/** The listing (Admin.listJobs) of a client of `context.namespace`. */
export function listJobs(context: AdminContext): Admin['listJobs'] {
  const { dbOf, run } = context;
  return async (given) => {
    const options = optionsOf('listJobs', given);
    knownKeys('listJobs option', options, [...FILTER_KEYS, 'limit', 'cursor']);
    const limit = options.limit ?? DEFAULT_PAGE;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ConfigError(`listJobs: limit must be an integer from 1 to ${MAX_PAGE}, got ${String(limit)}`);
    const f = filterParams(options, context.namespace);
    const below = cursorOf(options.cursor);
    const db = dbOf('listJobs');
    const rows = await run(() => db.query<SummaryRow>(pickSql(SUMMARY_COLUMNS), [...f, below, limit]));
    const jobs = rows.rows.map(summary);
    return { jobs, nextCursor: jobs.length === limit ? jobs[jobs.length - 1].id : null };
  };
}

export const FILTER_KEYS = ['namespace', 'status', 'definition', 'concurrencyKey', 'lane', 'createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'];

/**
 * The filter's parameters $1..$9: namespace, statuses, definition, concurrency key, lane, created
 * range, finished range. `allowed`: the statuses the operation may act on (a status outside it is
 * refused); `byDefault`: the statuses when the filter names none.
 */
export function filterParams(filter: JobFilter, namespace: string, allowed: readonly JobStatus[] = STATUSES, byDefault: readonly JobStatus[] = STATUSES): unknown[] {
  const statuses = filter.status === undefined ? [...byDefault] : Array.isArray(filter.status) ? filter.status : [filter.status];
  for (const s of statuses) {
    if (!allowed.includes(s)) throw new ConfigError(`status must be one of ${allowed.join(', ')} here, got ${JSON.stringify(s)}`);
  }
  if (statuses.length === 0) throw new ConfigError('status: name at least one status');
  const date = (what: string, d: unknown) => {
    if (d === undefined) return null;
    if (!(d instanceof Date) || Number.isNaN(d.getTime())) throw new ConfigError(`${what} must be a valid Date`);
    return d;
  };
  const name = (what: string, v: unknown) => (v === undefined ? null : nameOption(what, v, what === 'definition' ? MAX_NAME_BYTES : 1_000));
  return [
    filter.namespace === undefined ? namespace : nameOption('namespace', filter.namespace, MAX_NAME_BYTES),
    [...new Set(statuses)],
    name('definition', filter.definition),
    name('concurrencyKey', filter.concurrencyKey),
    name('lane', filter.lane),
    date('createdAfter', filter.createdAfter),
    date('createdBefore', filter.createdBefore),
    date('finishedAfter', filter.finishedAfter),
    date('finishedBefore', filter.finishedBefore),
  ];
}

/** A cursor as the statement takes it ($10: ids below it), or the top of bigint for the first page. */
function cursorOf(cursor: unknown): string {
  if (cursor === undefined || cursor === null) return INT8_MAX.toString();
  if (typeof cursor !== 'string' || !/^[0-9]{1,19}$/.test(cursor) || BigInt(cursor) > INT8_MAX) throw new ConfigError(`cursor must be the nextCursor of a page, got ${JSON.stringify(cursor)}`);
  return cursor;
}

/**
 * The filter's matching jobs below the cursor, newest first, at most $11: one branch per status,
 * each run only when $2 names it, so that a rare status among millions of rows is read from its own
 * range: Ready, Waiting, Failed and Cancelled along jobs_list_idx backwards (migration 0015), Executing
 * along jobs_lease_idx (the in-flight rows, sorted: \`id + 0\` keeps the planner off the primary key),
 * Succeeded along the primary keys of acta.jobs and acta.succeeded_jobs backwards, merged (acta.all_jobs:
 * the newest rows until a page is found).
 */
const FILTER_SQL = `j.namespace = $1 and j.id < $10::bigint
      and ($3::text is null or j.definition = $3) and ($4::text is null or j.concurrency_key = $4) and ($5::text is null or j.lane = $5)
      and ($6::timestamptz is null or j.created_at >= $6) and ($7::timestamptz is null or j.created_at < $7)
      and ($8::timestamptz is null or j.finished_at >= $8) and ($9::timestamptz is null or j.finished_at < $9)`;
const branch = (status: JobStatus) =>
  status === 'executing'
    ? `(select j.* from acta.jobs j where 'executing' = any ($2::text[]) and j.status = 'executing' and j.lease_expires_at is not null and ${FILTER_SQL.replace('j.id < $10', 'j.id + 0 < $10')} order by j.id + 0 desc limit $11)`
    : `(select j.* from ${status === 'succeeded' ? 'acta.all_jobs' : 'acta.jobs'} j where '${status}' = any ($2::text[]) and j.status = '${status}' and ${FILTER_SQL} order by j.id desc limit $11)`;
export const pickSql = (columns: string) => `
  select ${columns}
  from (${STATUSES.map(branch).join('\n   union all ')}) j
  order by j.id desc
  limit $11`;

const SUMMARY_COLUMNS = `j.id::text as id, j.namespace, j.definition, j.status, j.priority, j.attempts, j.max_attempts, ${DEFINITION_MAX_ATTEMPTS_SQL}, j.run_at, j.created_at,
  j.finished_at, j.concurrency_key, j.rate_key, j.lane, j.blocked_by, j.lease_holder, j.error`;

interface SummaryRow {
  id: string;
  namespace: string;
  definition: string;
  status: JobStatus;
  priority: number;
  attempts: number;
  max_attempts: number | null;
  definition_max_attempts: number | null;
  run_at: Date;
  created_at: Date;
  finished_at: Date | null;
  concurrency_key: string | null;
  rate_key: string | null;
  lane: string | null;
  blocked_by: JobSummary['blockedBy'];
  lease_holder: string | null;
  error: { message?: unknown } | null;
}

const summary = (r: SummaryRow): JobSummary => ({
  id: String(r.id),
  namespace: r.namespace,
  definition: r.definition,
  status: r.status,
  priority: r.priority,
  attempts: r.attempts,
  maxAttempts: r.max_attempts,
  ...attemptLimit(r.max_attempts, r.definition_max_attempts),
  runAt: r.run_at,
  createdAt: r.created_at,
  finishedAt: r.finished_at,
  concurrencyKey: r.concurrency_key,
  rateKey: r.rate_key,
  lane: r.lane,
  blockedBy: r.status === 'ready' ? r.blocked_by : null,
  leaseHolder: r.status === 'executing' ? r.lease_holder : null,
  errorMessage: r.error && typeof r.error.message === 'string' ? r.error.message.slice(0, 200) : null,
});
