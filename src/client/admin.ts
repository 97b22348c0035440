/*
 * The operations of a team running acta (docs/operating.md, "Admin operations"): list, retry,
 * cancel and delete jobs, see the workers and namespaces, pause and resume. Each is one statement
 * with its values as parameters (a filter's bulk operation: one statement per bounded batch), along
 * jobs_list_idx (migration 0015; test/db/admin.test.ts reads the plans).
 */
import * as os from 'node:os';
import { knownKeys, MAX_NAME_BYTES, nameOption } from '../config';
import type { Db } from '../db/Db';
import type { PauseAnswer, PauseRecord } from '../db/pauses';
import { attemptLimit, DEFINITION_MAX_ATTEMPTS_SQL } from '../db/jobs';
import { type AlertInfo, listAlerts } from '../db/alerts';
import { WORKER_LIVE_SQL } from '../db/workers';
import { INT8_MAX, type JobId, type JobStatus, type MaxAttemptsFrom } from '../db/types';
import { ConfigError } from '../errors';
import { jobIdText } from './jobId';
import type { Ledger } from '../ledger';

const STATUSES: readonly JobStatus[] = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];
/** Rows a listing returns when not told (at most MAX_PAGE). */
const DEFAULT_PAGE = 50;
const MAX_PAGE = 1_000;
/** Rows one statement of a bulk retry, cancel or delete takes (each batch its own transaction). */
export const ADMIN_BATCH = 500;

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

/**
 * The jobs a retry, cancel or delete acts on: these ids, or every job matching a filter. A filter
 * that names nothing but the namespace selects every job of it: refused (ConfigError) unless it
 * says `all: true`, as `acta jobs` refuses it without a filter option.
 */
export type JobSelection = { ids: (JobId | number | bigint)[]; namespace?: string } | (JobFilter & { all?: boolean });

/** A worker incarnation of acta.workers, with what it holds. */
export interface WorkerInfo {
  id: string;
  namespace: string;
  hostname: string;
  pid: number;
  build: string | null;
  definitions: string[];
  /** As the membership list has it: a worker silent past 7 heartbeats is marked dead by the next recovery pass. */
  status: 'alive' | 'stopped' | 'dead';
  /**
   * Listed alive but silent past 7 heartbeats (1.75 × its lease): gone (crashed, or cut off), not
   * yet marked dead, which only a live worker's recovery pass does; acta why counts it not live
   * (WORKER_LIVE_SQL). False for every other worker, and for one registered without its lease.
   */
  silent: boolean;
  startedAt: Date;
  lastHeartbeatAt: Date;
  stoppedAt: Date | null;
  /** ms since its last heartbeat, on the database clock. */
  silentMs: number;
  /** The Executing jobs it holds, by id. */
  holds: JobId[];
}

export interface NamespaceInfo {
  name: string;
  /** Jobs per status (every status present, 0 when none), each counted up to COUNT_CAP (100,000): a count at the cap means at least that many. */
  counts: Record<JobStatus, number>;
  /**
   * ms the longest-waiting due Ready job of a declared definition has been due, or null when none is
   * due: the jobs a worker may claim now, so neither parked ones nor those a pause holds (its
   * definition's or the whole namespace's), which oldestPausedMs counts.
   */
  oldestReadyMs: number | null;
  /** The same for the due Ready jobs a pause holds (they wait for a resume, not for a worker); null when none. */
  oldestPausedMs: number | null;
  /** The namespace's pauses (the whole namespace: definition null). */
  pauses: PauseRecord[];
}

export interface Admin {
  /**
   * Stops the claims of the namespace (default the client's) or of one definition, fleet-wide, within
   * one wakeup, workers started later included; running attempts finish (acta.pause). `by` default:
   * user@host of this process. Resolves the pause that stands (a scope paused already keeps its
   * first who, why and since: `created` false).
   */
  pause(options?: { namespace?: string; definition?: string; reason?: string; by?: string }): Promise<PauseAnswer>;
  /** Lifts that scope's pause and wakes its workers at once; true when it was paused. A namespace's resume leaves its definitions' pauses. */
  resume(options?: { namespace?: string; definition?: string }): Promise<boolean>;
  /** Lists jobs newest first by keyset: pass `nextCursor` back as `cursor`. Throws ConfigError for a bad filter. */
  listJobs(options?: ListJobsOptions): Promise<JobPage>;
  /**
   * Retries Failed or Cancelled jobs: each becomes Ready, due now, with a fresh attempt budget
   * (attempts and uncharged returns 0; every earlier attempt stays in the attempt ledger and the
   * fence goes on from its execution number), its result, finish time and cancel request cleared,
   * its last error kept until the next attempt ends. A filter retries its Failed jobs (Cancelled
   * ones when its status says so), in batches of 500. Wakes the namespace. Resolves the ids retried.
   */
  retryJobs(selection: JobSelection): Promise<JobId[]>;
  /**
   * Cancels jobs as client.cancel does, each (a filter: its Ready, Waiting and Executing jobs, in
   * batches). `{}` (every job of the namespace) is refused unless given as `{ all: true }`; so for
   * retryJobs and deleteJobs.
   */
  cancelJobs(selection: JobSelection): Promise<{ cancelled: JobId[]; requested: JobId[] }>;
  /** Deletes finished jobs (Succeeded, Failed, Cancelled) with their steps, signals and attempts (acta.delete_jobs). Others are left: cancel them first. */
  deleteJobs(selection: JobSelection): Promise<JobId[]>;
  /** The namespace's workers, newest first: every live one, and the stopped and dead of the last day. */
  listWorkers(options?: { namespace?: string }): Promise<WorkerInfo[]>;
  /** Every namespace (with a worker, a pause, or a job Ready, Waiting, Failed or Cancelled) with its jobs counted by status (each up to 100,000), its oldest due job's wait and its pauses. */
  namespaces(): Promise<NamespaceInfo[]>;
  /**
   * The namespace's alerts as sys.alerts left them in acta.alerts (docs/alerts.md): the open ones
   * (resolvedAt null), most recently raised first; with `all`, then the resolved ones still kept
   * (a day by default). At most `limit`, 1 to 1,000 (default 500). Read only: a namespace whose
   * workers do not run sys.alerts has none.
   */
  alerts(options?: AlertsOptions): Promise<AlertInfo[]>;
}

export interface AlertsOptions {
  /** Default: the client's namespace. */
  namespace?: string;
  /** Resolved alerts too (default false: the open ones only). */
  all?: boolean;
  /** 1 to 1,000, default 500. */
  limit?: number;
}

/** Alerts client.alerts returns when not told (at most MAX_PAGE). */
export const DEFAULT_ALERTS = 500;

/** The admin operations of a client of `namespace` (src/client/client.ts delegates to them). */
export function createAdmin(context: { db?: Db; ledger: Ledger; namespace: string; verdict: (err: unknown) => Promise<unknown> }): Admin {
  const { ledger } = context;
  const nsOf = (ns: unknown) => (ns === undefined ? context.namespace : nameOption('namespace', ns, MAX_NAME_BYTES));
  const dbOf = (what: string): Db => {
    if (!context.db) throw new ConfigError(`${what}: this client has a ledger and no database`);
    return context.db;
  };
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw await context.verdict(err);
    }
  };
  const byDefault = (() => {
    try {
      return `${os.userInfo().username}@${os.hostname()}`;
    } catch {
      return os.hostname();
    }
  })();
  return {
    pause: async (options = {}) => {
      knownKeys('pause option', options, ['namespace', 'definition', 'reason', 'by']);
      const scope = { namespace: nsOf(options.namespace), definition: options.definition === undefined ? null : nameOption('definition', options.definition, MAX_NAME_BYTES) };
      const text = (what: string, v: unknown) => {
        if (v === undefined) return undefined;
        if (typeof v !== 'string' || v.length > 1_000 || v.includes('\u0000')) throw new ConfigError(`pause: ${what} must be a string of at most 1,000 characters without \\u0000`);
        return v;
      };
      return run(() => ledger.pause({ ...scope, by: text('by', options.by) ?? byDefault, reason: text('reason', options.reason) ?? null }));
    },
    resume: async (options = {}) => {
      knownKeys('resume option', options, ['namespace', 'definition']);
      return run(() => ledger.resume({ namespace: nsOf(options.namespace), definition: options.definition === undefined ? null : nameOption('definition', options.definition, MAX_NAME_BYTES) }));
    },
    listJobs: async (options = {}) => {
      knownKeys('listJobs option', options, [...FILTER_KEYS, 'limit', 'cursor']);
      const limit = options.limit ?? DEFAULT_PAGE;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ConfigError(`listJobs: limit must be an integer from 1 to ${MAX_PAGE}, got ${String(limit)}`);
      const f = filterParams(options, context.namespace);
      const below = cursorOf(options.cursor);
      const db = dbOf('listJobs');
      const rows = await run(() => db.query<SummaryRow>(pickSql(SUMMARY_COLUMNS), [...f, below, limit]));
      const jobs = rows.rows.map(summary);
      return { jobs, nextCursor: jobs.length === limit ? jobs[jobs.length - 1].id : null };
    },
    retryJobs: (selection) =>
      inBatches('retryJobs', dbOf('retryJobs'), selection, context.namespace, ['failed'], ['failed', 'cancelled'], run, (picked) => ({
        ctes: `, done as (
           update acta.jobs j
           set status = 'ready', run_at = now(), attempts = 0, uncharged_returns = 0, result = null, finished_at = null,
               cancel_requested_at = null, blocked_by = null, fair_tag = null, lease_holder = null, lease_expires_at = null,
               claimed_at = null, started = false
           where j.id = any (array(select p.id from ${picked} p)) and j.status in ('failed', 'cancelled')
           returning j.id, j.parent_id
         ),
         -- A retried child has not ended for its parent any more: an unfinished parent counts it
         -- open again, else the child's second end would be counted a second time and resume the
         -- parent while a sibling still runs (docs/workflows.md, "Child jobs"; test/db/workflows.test.ts,
         -- "a retried child"). Its 'fail-parent' failure no longer fails the parent's wait unless
         -- another one's does. Parents after their children (the family's lock order); a parent
         -- that ended meanwhile is skipped (its status re-read under the lock).
         reopened as (
           update acta.jobs p
           set children_open = coalesce(p.children_open, 0) + r.n,
               children_failed = case when coalesce(p.children_failed, false) then exists (
                   select 1 from acta.jobs c
                   where c.parent_id = p.id and c.fail_parent and c.status in ('failed', 'cancelled')
                     and c.id <> all (array(select d.id from done d))
                 ) else p.children_failed end
           from (select d.parent_id, count(*)::integer as n from done d where d.parent_id is not null group by d.parent_id) r
           where p.id = r.parent_id and p.status in ('ready', 'executing', 'waiting')
         ),
         woken as (select pg_notify('acta_jobs', $1) as n where exists (select 1 from done))`,
        select: `array(select d.id::text from done d order by d.id desc) as ids, null::text[] as requested, (select count(*) from woken) as woken`,
      })).then((r) => r.ids),
    cancelJobs: async (selection) => {
      const r = await inBatches('cancelJobs', dbOf('cancelJobs'), selection, context.namespace, ['ready', 'waiting', 'executing'], ['ready', 'waiting', 'executing'], run, (picked) => ({
        ctes: `, done as materialized (select p.id, acta.cancel_job($1, p.id) as answer from ${picked} p)`,
        select: `array(select d.id::text from done d where d.answer = 'cancelled' order by d.id desc) as ids,
                 array(select d.id::text from done d where d.answer = 'requested' order by d.id desc) as requested`,
      }));
      return { cancelled: r.ids, requested: r.requested };
    },
    deleteJobs: (selection) =>
      inBatches('deleteJobs', dbOf('deleteJobs'), selection, context.namespace, ['succeeded', 'failed', 'cancelled'], ['succeeded', 'failed', 'cancelled'], run, (picked) => ({
        // Finished rows, locked (in acta.jobs or acta.succeeded_jobs: a lock cannot be taken through
        // their union), then deleted with all that refers to them by the one deleter (acta.delete_jobs).
        ctes: `, kept as materialized (
           select j.id from acta.jobs j where j.id = any (array(select p.id from ${picked} p)) and j.status in ('succeeded', 'failed', 'cancelled')
           for update
         ),
         moved as materialized (
           select s.id from acta.succeeded_jobs s where s.id = any (array(select p.id from ${picked} p))
           for update
         ),
         done as materialized (select k.id from kept k union all select m.id from moved m),
         deleted as materialized (select acta.delete_jobs(array(select d.id from done d)) as n)`,
        select: `array(select d.id::text from done d, deleted order by d.id desc) as ids, null::text[] as requested`,
      })).then((r) => r.ids),
    listWorkers: async (options = {}) => {
      knownKeys('listWorkers option', options, ['namespace']);
      const ns = nsOf(options.namespace);
      const db = dbOf('listWorkers');
      const { rows } = await run(() =>
        db.query<{ id: string; namespace: string; hostname: string; pid: number; build: string | null; definitions: string[]; status: WorkerInfo['status']; silent: boolean; started_at: Date; last_heartbeat_at: Date; stopped_at: Date | null; silent_ms: number; holds: string[] }>(
          `with held as (
             select j.lease_holder, array_agg(j.id::text order by j.id) as ids
             from acta.jobs j where j.namespace = $1 and j.status = 'executing' and j.lease_expires_at is not null group by j.lease_holder
           )
           select w.id, w.namespace, w.hostname, w.pid, w.build, w.definitions, w.status, w.status = 'alive' and not ${WORKER_LIVE_SQL} as silent,
                  w.started_at, w.last_heartbeat_at, w.stopped_at,
                  extract(epoch from now() - w.last_heartbeat_at) * 1000 as silent_ms, coalesce(h.ids, '{}') as holds
           from acta.workers w left join held h on h.lease_holder = w.id
           where w.namespace = $1 and (w.status = 'alive' or coalesce(w.stopped_at, w.last_heartbeat_at) > now() - interval '1 day')
           order by w.started_at desc, w.id`,
          [ns],
        ),
      );
      return rows.map((r) => ({
        id: r.id,
        namespace: r.namespace,
        hostname: r.hostname,
        pid: r.pid,
        build: r.build,
        definitions: r.definitions,
        status: r.status,
        silent: r.silent,
        startedAt: r.started_at,
        lastHeartbeatAt: r.last_heartbeat_at,
        stoppedAt: r.stopped_at,
        silentMs: Math.max(0, Math.round(Number(r.silent_ms))),
        holds: r.holds,
      }));
    },
    alerts: async (options = {}) => {
      knownKeys('alerts option', options, ['namespace', 'all', 'limit']);
      const limit = options.limit ?? DEFAULT_ALERTS;
      if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new ConfigError(`alerts: limit must be an integer from 1 to ${MAX_PAGE}, got ${String(limit)}`);
      if (options.all !== undefined && typeof options.all !== 'boolean') throw new ConfigError(`alerts: all must be a boolean, got ${JSON.stringify(String(options.all)).slice(0, 80)}`);
      const namespace = nsOf(options.namespace);
      const db = dbOf('alerts');
      return run(() => listAlerts(db, { namespace, resolved: options.all === true, limit }));
    },
    namespaces: async () => {
      const db = dbOf('namespaces');
      // JIT off for this read alone (SET LOCAL: a pooler in transaction mode keeps it to this
      // transaction): its estimates (a guessed count of namespaces, each with capped counts) price
      // it past jit_above_cost, and a server with JIT on spent ~0.4 s compiling a ~10 ms read
      // (test/adminTables.test.ts, "namespaces: read without JIT").
      const { rows } = await run(() =>
        db.transaction(async (tx) => {
          await tx.query('set local jit = off');
          return tx.query<Record<JobStatus, string> & { name: string; oldest_ready_ms: number | null; oldest_paused_ms: number | null; pauses: { definition: string; paused_by: string | null; reason: string | null; paused_at: string }[] }>(
          `with recursive listed as (
             (select j.namespace from acta.jobs j where j.status in ('ready', 'waiting', 'failed', 'cancelled') order by j.namespace limit 1)
             union all
             select (select j.namespace from acta.jobs j
                     where j.status in ('ready', 'waiting', 'failed', 'cancelled') and j.namespace > l.namespace order by j.namespace limit 1)
             from listed l where l.namespace is not null
           )
           select n.name, ${STATUSES.map((st) => `${countSql(st)} as ${st}`).join(', ')},
                  o.oldest_ready_ms, o.oldest_paused_ms,
                  coalesce((select jsonb_agg(jsonb_build_object('definition', p.definition, 'paused_by', p.paused_by, 'reason', p.reason, 'paused_at', p.paused_at) order by p.definition)
                            from acta.pauses p where p.namespace = n.name), '[]') as pauses
           from (
             select a.name from acta.namespaces a
             union select p.namespace from acta.pauses p
             -- A namespace with jobs and no worker yet: the distinct namespaces of jobs_list_idx, one probe each.
             union select l.namespace from listed l where l.namespace is not null
           ) n
           -- The oldest due row of each declared definition (parked ones aside), split by whether a
           -- pause holds it (its definition's or the namespace's, as acta.claim_jobs reads them): a
           -- paused definition's due jobs wait for its resume, not for a worker (test/adminTables.test.ts).
           cross join lateral (
             select extract(epoch from now() - min(x.run_at) filter (where not d.held)) * 1000 as oldest_ready_ms,
                    extract(epoch from now() - min(x.run_at) filter (where d.held)) * 1000 as oldest_paused_ms
             from (select d.name, exists (select 1 from acta.pauses p where p.namespace = n.name and p.definition in ('', d.name)) as held
                   from acta.definitions d where d.namespace = n.name) d
             cross join lateral (
               select j.run_at from acta.jobs j
               where hashtextextended(j.namespace || '/' || j.definition, 0) = hashtextextended(n.name || '/' || d.name, 0)
                 and j.namespace = n.name and j.definition = d.name and j.status = 'ready' and j.blocked_by is null and j.fair_tag is null
               order by j.run_at limit 1) x
             where x.run_at <= now()) o
           order by n.name`,
          [COUNT_CAP],
          );
        }),
      );
      return rows.map((r) => ({
        name: r.name,
        counts: Object.fromEntries(STATUSES.map((s) => [s, Number(r[s])])) as Record<JobStatus, number>,
        oldestReadyMs: r.oldest_ready_ms === null ? null : Math.round(Number(r.oldest_ready_ms)),
        oldestPausedMs: r.oldest_paused_ms === null ? null : Math.round(Number(r.oldest_paused_ms)),
        pauses: r.pauses.map((p) => ({ namespace: r.name, definition: p.definition === '' ? null : p.definition, pausedBy: p.paused_by, reason: p.reason, pausedAt: new Date(p.paused_at) })),
      }));
    },
  };
}

/** Counts stop here (namespaces): a count is read from the rows it counts, so a larger one costs its size. */
export const COUNT_CAP = 100_000;

/** The namespace n's jobs of one status, up to $1 (COUNT_CAP), along the index its listing reads (see pickSql). */
const countSql = (status: JobStatus) =>
  status === 'executing'
    ? `(select count(*) from (select 1 from acta.jobs j where j.namespace = n.name and j.status = 'executing' and j.lease_expires_at is not null limit $1) c)`
    : status === 'succeeded'
      ? `(select count(*) from (select 1 from acta.all_jobs j where j.namespace = n.name and j.status = 'succeeded' order by j.id desc limit $1) c)`
      : `(select count(*) from (select 1 from acta.jobs j where j.namespace = n.name and j.status = '${status}' limit $1) c)`;

const FILTER_KEYS = ['namespace', 'status', 'definition', 'concurrencyKey', 'lane', 'createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'];
/** The filter fields that narrow a bulk selection below the whole namespace (all but `namespace`). */
const NARROWING_KEYS = FILTER_KEYS.filter((k) => k !== 'namespace');

/**
 * The filter's parameters $1..$9: namespace, statuses, definition, concurrency key, lane, created
 * range, finished range. `allowed`: the statuses the operation may act on (a status outside it is
 * refused); `byDefault`: the statuses when the filter names none.
 */
function filterParams(filter: JobFilter, namespace: string, allowed: readonly JobStatus[] = STATUSES, byDefault: readonly JobStatus[] = STATUSES): unknown[] {
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
const pickSql = (columns: string) => `
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

/**
 * A bulk operation (`what`: its name, for errors): the selection's jobs in batches of ADMIN_BATCH,
 * each one statement (`body` follows a `picked` CTE of the batch's ids and answers `ids`,
 * `requested`), until a batch picks fewer than a batch. Ids given: those of the namespace, in
 * batches likewise. A filter that narrows nothing needs `all: true` (test/db/admin.test.ts).
 */
async function inBatches(
  what: string,
  db: Db,
  selection: JobSelection,
  namespace: string,
  byDefault: readonly JobStatus[],
  allowed: readonly JobStatus[],
  run: <T>(fn: () => Promise<T>) => Promise<T>,
  body: (picked: string) => { ctes: string; select: string },
): Promise<{ ids: string[]; requested: string[] }> {
  if (selection === null || typeof selection !== 'object') throw new ConfigError('a selection is { ids } or a filter');
  const out = { ids: [] as string[], requested: [] as string[] };
  const b = body('picked');
  if ('ids' in selection) {
    knownKeys('selection', selection, ['ids', 'namespace']);
    if (!Array.isArray(selection.ids)) throw new ConfigError('ids must be an array of job ids');
    // As every client call reads an id (jobIdText): leading zeros are the job, beyond bigint no job's.
    const ids = selection.ids.map((id) => jobIdText(id)).filter((id): id is string => id !== null);
    const ns = selection.namespace === undefined ? namespace : nameOption('namespace', selection.namespace, MAX_NAME_BYTES);
    for (let i = 0; i < ids.length; i += ADMIN_BATCH) {
      const batch = ids.slice(i, i + ADMIN_BATCH);
      const { rows } = await run(() =>
        db.query<{ ids: string[]; requested: string[] | null }>(
          `with picked as materialized (select j.id from acta.all_jobs j where j.id = any ($2::bigint[]) and j.namespace = $1 and j.status = any ($3::text[]))${b.ctes} select ${b.select}`,
          [ns, batch, allowed],
        ),
      );
      out.ids.push(...rows[0].ids);
      out.requested.push(...(rows[0].requested ?? []));
    }
    return out;
  }
  knownKeys('filter', selection, [...FILTER_KEYS, 'all']);
  const { all, ...filter } = selection as JobFilter & { all?: unknown };
  if (all !== undefined && typeof all !== 'boolean') throw new ConfigError(`${what}: all must be a boolean, got ${JSON.stringify(String(all)).slice(0, 80)}`);
  // Every job of the namespace is a selection to state, not one to fall into with `{}` (or a
  // filter whose fields are all undefined): the CLI refuses it likewise (src/ops/cli/admin.ts).
  const params = filterParams(filter, namespace, allowed, byDefault);
  if (all !== true && !NARROWING_KEYS.some((k) => (filter as Record<string, unknown>)[k] !== undefined)) {
    throw new ConfigError(`${what}: this selection names no ids and no filter, so it is every job of namespace "${params[0] as string}": give { ids }, a filter (status, definition, concurrencyKey, lane, createdAfter, ...), or { all: true } to mean every job`);
  }
  let below = INT8_MAX.toString();
  for (;;) {
    const { rows } = await run(() =>
      db.query<{ ids: string[]; requested: string[] | null; last: string | null; n: string }>(
        `with picked as materialized (${pickSql('j.id')})${b.ctes}
         select ${b.select}, (select min(p.id)::text from picked p) as last, (select count(*) from picked) as n`,
        [...params, below, ADMIN_BATCH],
      ),
    );
    out.ids.push(...rows[0].ids);
    out.requested.push(...(rows[0].requested ?? []));
    if (Number(rows[0].n) < ADMIN_BATCH || rows[0].last === null) return out;
    below = rows[0].last;
  }
}
