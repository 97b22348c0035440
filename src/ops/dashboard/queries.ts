/*
 * The dashboard's own reads, beside the admin operations it calls (src/client/admin.ts): the
 * attempt ledger per minute, one job with its values cut by the database, and a page of its
 * children and of its signals (which `acta job <id> --children|--signals` prints too). Each is one
 * statement, values as parameters; test/dashboard/plans.test.ts reads their plans on a large table.
 */
import type { Queryable } from '../../db/Db';
import { DEFINITION_MAX_ATTEMPTS_SQL, EXECUTIONS_SHOWN, type JobHeader, jobHeader } from '../../db/jobs';
import type { JobStatus } from '../../db/types';

/** Characters of a payload, result, error or progress a job's page shows; the rest is cut by the database. */
export const SHOWN_CHARS = 65_536;
/** A value shown in a table's row (a step's result, a signal's payload), characters. */
const ROW_VALUE_CHARS = 2_048;
/** The newest attempts and the first steps a job's page lists (with the totals): as many attempts as getJob reads. */
const PAGE_ROWS = EXECUTIONS_SHOWN;
/** A job's children, and its signals, a page at a time: the dashboard's page, the CLI's default. */
export const FAMILY_PAGE = 50;
/** Where a count of a job's children or signals stops ("≥"), as the overview's counts. */
export const FAMILY_COUNT_CAP = 100_000;

/** Attempts that finished in one minute of the window, by outcome. */
export interface MinuteCounts {
  minute: Date;
  succeeded: number;
  /** Failed attempts: retried (failed) and final (failed_final). */
  failed: number;
  /** Every other outcome: parked (signal_wait, children_wait), rate_limited, skipped, cancelled, handed back, expired, lost to recovery. */
  other: number;
}

/**
 * The last `minutes` minutes (the current one included) of the namespace's attempt ledger, one row
 * per minute, zeros included. The namespace's attempts are those of its workers (the attempt ledger
 * outlives the jobs it counts), read along executions_finished_idx (BRIN, migration 0017), and the
 * successes moved to acta.succeeded_jobs, whose rows record their last attempt, along
 * succeeded_jobs_finished_idx (migration 0023).
 */
export async function attemptsPerMinute(q: Queryable, namespace: string, minutes: number): Promise<MinuteCounts[]> {
  const { rows } = await q.query<{ minute: Date; succeeded: string; failed: string; other: string }>(
    `with counted as (
       select date_trunc('minute', e.finished_at) as minute,
              count(*) filter (where e.outcome = 'succeeded') as succeeded,
              count(*) filter (where e.outcome in ('failed', 'failed_final')) as failed,
              count(*) filter (where e.outcome not in ('succeeded', 'failed', 'failed_final')) as other
       from (select e.finished_at, e.outcome from acta.executions e
             where e.finished_at >= date_trunc('minute', now()) - make_interval(mins => $2::int - 1)
               and e.worker_id = any (array(select w.id from acta.workers w where w.namespace = $1))
             union all
             select s.finished_at, 'succeeded' from acta.succeeded_jobs s
             where hashtextextended(s.namespace || '/' || s.status, 0) = hashtextextended($1 || '/succeeded', 0)
               and s.namespace = $1 and s.status = 'succeeded'
               and s.finished_at >= date_trunc('minute', now()) - make_interval(mins => $2::int - 1)) e
       group by 1
     )
     select m.minute, coalesce(c.succeeded, 0) as succeeded, coalesce(c.failed, 0) as failed, coalesce(c.other, 0) as other
     from generate_series(date_trunc('minute', now()) - make_interval(mins => $2::int - 1), date_trunc('minute', now()), interval '1 minute') m(minute)
     left join counted c on c.minute = m.minute
     order by m.minute`,
    [namespace, minutes],
  );
  return rows.map((r) => ({ minute: new Date(r.minute), succeeded: Number(r.succeeded), failed: Number(r.failed), other: Number(r.other) }));
}

/** A JSON value as the page shows it: its first SHOWN_CHARS characters and its full size. */
export interface ShownValue {
  text: string;
  /** Bytes of the whole value as JSON text. */
  bytes: number;
  truncated: boolean;
}

export interface AttemptRow {
  execution: number;
  workerId: string | null;
  claimedAt: Date;
  finishedAt: Date;
  outcome: string;
  charged: boolean;
  error: string | null;
}

export interface StepRow {
  name: string;
  execution: number;
  recordedAt: Date;
  result: ShownValue | null;
}

export interface JobDetail extends JobHeader {
  namespace: string;
  /** The job that spawned it (ctx.spawn); definition and status null when that job is gone (deleted). */
  parent: { id: string; definition: string | null; status: JobStatus | null } | null;
  leaseHolder: string | null;
  leaseExpiresAt: Date | null;
  payload: ShownValue | null;
  result: ShownValue | null;
  error: ShownValue | null;
  progress: ShownValue | null;
  /** The newest PAGE_ROWS attempts, newest first, and how many there are. */
  attemptRows: AttemptRow[];
  attemptCount: number;
  /** The first PAGE_ROWS steps by name, and how many there are. */
  steps: StepRow[];
  stepCount: number;
}

/** A prefix the database cut and the whole value's size: cut when the whole is larger. */
const cut = (text: string, bytes: unknown): ShownValue => ({ text, bytes: Number(bytes), truncated: Number(bytes) > Buffer.byteLength(text) });

const shown = (col: string) => `left(${col}::text, $3) as ${col.replace('j.', '')}_text, octet_length(${col}::text) as ${col.replace('j.', '')}_bytes`;

/** One job of the namespace for its page, or null; every JSON value cut to SHOWN_CHARS by the database. */
export async function jobDetail(q: Queryable, namespace: string, id: string): Promise<JobDetail | null> {
  const { rows } = await q.query<Record<string, unknown>>(
    `select j.id::text as id, j.namespace, j.definition, j.status, j.attempts, j.max_attempts, ${DEFINITION_MAX_ATTEMPTS_SQL}, j.execution, j.priority, j.run_at,
            j.created_at, j.finished_at, j.idempotency_key, j.concurrency_key, j.rate_key, j.lane,
            case when j.status = 'executing' then j.lease_holder end as lease_holder,
            case when j.status = 'executing' then j.lease_expires_at end as lease_expires_at, j.cancel_requested_at,
            j.parent_id::text as parent_id, p.definition as parent_definition, p.status as parent_status,
            ${['j.payload', 'j.result', 'j.error', 'j.progress'].map(shown).join(', ')},
            (select count(*) from acta.all_executions e where e.job_id = j.id) as attempt_count,
            coalesce((select json_agg(json_build_object('execution', e.execution, 'workerId', e.worker_id, 'claimedAt', e.claimed_at, 'finishedAt', e.finished_at,
                                                        'outcome', e.outcome, 'charged', e.charged, 'error', left(e.error ->> 'message', 500)) order by e.execution desc)
                      from (select * from acta.all_executions e where e.job_id = j.id order by e.execution desc limit ${PAGE_ROWS}) e), '[]') as attempt_rows,
            (select count(*) from acta.steps s where s.job_id = j.id) as step_count,
            coalesce((select json_agg(json_build_object('name', s.name, 'execution', s.execution, 'recordedAt', s.recorded_at,
                                                        'text', left(s.result::text, ${ROW_VALUE_CHARS}), 'bytes', octet_length(s.result::text)) order by s.name)
                      from (select * from acta.steps s where s.job_id = j.id order by s.name limit ${PAGE_ROWS}) s), '[]') as steps
     from acta.all_jobs j
     left join acta.all_jobs p on p.id = j.parent_id
     where j.id = $1::bigint and j.namespace = $2`,
    [id, namespace, SHOWN_CHARS],
  );
  if (rows.length === 0) return null;
  const r = rows[0] as Record<string, any>;
  const value = (name: string): ShownValue | null => (r[`${name}_text`] === null ? null : cut(r[`${name}_text`], r[`${name}_bytes`]));
  return {
    ...jobHeader(r as Parameters<typeof jobHeader>[0]),
    namespace: r.namespace,
    parent: r.parent_id === null ? null : { id: r.parent_id, definition: r.parent_definition, status: r.parent_status },
    leaseHolder: r.lease_holder,
    leaseExpiresAt: r.lease_expires_at,
    payload: value('payload'),
    result: value('result'),
    error: value('error'),
    progress: value('progress'),
    attemptCount: Number(r.attempt_count),
    attemptRows: (r.attempt_rows as any[]).map((e) => ({ ...e, claimedAt: new Date(e.claimedAt), finishedAt: new Date(e.finishedAt) })),
    stepCount: Number(r.step_count),
    steps: (r.steps as any[]).map((s) => ({
      name: s.name,
      execution: s.execution,
      recordedAt: new Date(s.recordedAt),
      result: s.text === null ? null : cut(s.text, s.bytes),
    })),
  };
}

/** A page of a job's children or signals, in id order. */
export interface FamilyPage<T> {
  rows: T[];
  /** How many there are, counted up to FAMILY_COUNT_CAP. */
  total: number;
  /** The page after this one starts after this id; null: this was the last. */
  nextCursor: string | null;
}

export interface ChildRow {
  id: string;
  definition: string;
  status: JobStatus;
  /** Spawned 'fail-parent': its failure, cancel or delete fails the parent's wait. */
  failParent: boolean;
  createdAt: Date;
  finishedAt: Date | null;
  /** The last error's message, at most 200 characters. */
  errorMessage: string | null;
}

/** The rows of a page of `limit` and the cursor of the next: a page asks for one row more than it shows. */
function paged<T extends { id: string }>(rows: T[], total: unknown, limit: number): FamilyPage<T> {
  const more = rows.length > limit;
  const shownRows = more ? rows.slice(0, limit) : rows;
  return { rows: shownRows, total: Number(total), nextCursor: more ? shownRows[shownRows.length - 1].id : null };
}

/**
 * A page of `limit` children of job `parentId` (found in the namespace first: jobDetail, getJob), in
 * the order spawned (id), after the id `after` (null: from the first). A child is in its parent's
 * namespace (acta.spawn_children) and stays in acta.jobs when it succeeds (acta.complete_executions moves
 * only jobs without a parent to acta.succeeded_jobs), so acta.jobs holds them all, along
 * jobs_parent_idx (parent_id, id; migration 0025). The page is the index's range from (parent, after)
 * to the parent's last entry, written as that range (a row comparison, an upper bound) and ordered
 * by both columns: with `parent_id = $1 and id > $2 order by id` the planner may walk the primary key
 * from the cursor filtering on the parent, and did for a parent of 50,000 children among 1,000,000
 * jobs, which on the last page reads every job above the cursor (test/dashboard/plans.test.ts).
 * The aggregate orders by both columns too: by id alone, PostgreSQL 16+ sorts the page again.
 * A child deleted (by an admin or retention) is not listed.
 */
export async function jobChildren(q: Queryable, parentId: string, after: string | null, limit = FAMILY_PAGE): Promise<FamilyPage<ChildRow>> {
  const { rows } = await q.query<{ total: string; rows: Record<string, any>[] }>(
    `select (select count(*) from (select from acta.jobs c where c.parent_id = $1::bigint limit ${FAMILY_COUNT_CAP}) c) as total,
            coalesce((select json_agg(json_build_object('id', c.id::text, 'definition', c.definition, 'status', c.status, 'failParent', coalesce(c.fail_parent, false),
                                                        'createdAt', c.created_at, 'finishedAt', c.finished_at, 'errorMessage', left(c.error ->> 'message', 200)) order by c.parent_id, c.id)
                      from (select * from acta.jobs c where c.parent_id <= $1::bigint and (c.parent_id, c.id) > ($1::bigint, $2::bigint) order by c.parent_id, c.id limit $3) c), '[]') as rows`,
    [parentId, after ?? '0', limit + 1],
  );
  const children = rows[0].rows.map((c): ChildRow => ({ ...(c as ChildRow), createdAt: new Date(c.createdAt), finishedAt: c.finishedAt === null ? null : new Date(c.finishedAt) }));
  return paged(children, rows[0].total, limit);
}

export interface SignalRow {
  id: string;
  name: string;
  sentAt: Date;
  /** When a wait consumed it, and the wait's step; null while it waits in the mailbox. */
  consumedAt: Date | null;
  consumedStep: string | null;
  idempotencyKey: string | null;
  /** Its payload, cut to ROW_VALUE_CHARS by the database; null when sent without one. */
  payload: ShownValue | null;
}

/**
 * A page of `limit` signals sent to job `jobId` (found in the namespace first), in the order sent
 * (id), after the id `after` (null: from the first), consumed or not, along signals_job_idx (job_id,
 * id; migration 0025), its range written as jobChildren's for the same reason; the unconsumed ones
 * counted along signals_mailbox_idx.
 */
export async function jobSignals(q: Queryable, jobId: string, after: string | null, limit = FAMILY_PAGE): Promise<FamilyPage<SignalRow> & { pending: number }> {
  const { rows } = await q.query<{ total: string; pending: string; rows: Record<string, any>[] }>(
    `select (select count(*) from (select from acta.signals s where s.job_id = $1::bigint limit ${FAMILY_COUNT_CAP}) s) as total,
            (select count(*) from (select from acta.signals s where s.job_id = $1::bigint and s.consumed_at is null limit ${FAMILY_COUNT_CAP}) s) as pending,
            coalesce((select json_agg(json_build_object('id', s.id::text, 'name', s.name, 'sentAt', s.sent_at, 'consumedAt', s.consumed_at, 'consumedStep', s.consumed_step,
                                                        'idempotencyKey', s.idempotency_key, 'text', left(s.payload::text, ${ROW_VALUE_CHARS}), 'bytes', octet_length(s.payload::text)) order by s.job_id, s.id)
                      from (select * from acta.signals s where s.job_id <= $1::bigint and (s.job_id, s.id) > ($1::bigint, $2::bigint) order by s.job_id, s.id limit $3) s), '[]') as rows`,
    [jobId, after ?? '0', limit + 1],
  );
  const signals = rows[0].rows.map(
    (s): SignalRow => ({
      id: s.id,
      name: s.name,
      sentAt: new Date(s.sentAt),
      consumedAt: s.consumedAt === null ? null : new Date(s.consumedAt),
      consumedStep: s.consumedStep,
      idempotencyKey: s.idempotencyKey,
      payload: s.text === null ? null : cut(s.text, s.bytes),
    }),
  );
  return { ...paged(signals, rows[0].total, limit), pending: Number(rows[0].pending) };
}
