/*
 * client.listWorkers, namespaces and alerts (docs/operating.md, "Admin operations"): what the
 * fleet's workers hold, each namespace's jobs counted, and the alerts sys.alerts left; reads only.
 */
import { knownKeys, optionsOf } from '../config';
import type { PauseRecord } from '../db/pauses';
import { listAlerts } from '../db/alerts';
import { WORKER_LIVE_SQL } from '../db/workers';
import type { JobId, JobStatus } from '../db/types';
import { ConfigError } from '../errors';
import type { Admin, AdminContext } from './admin';
import { MAX_PAGE, STATUSES } from './listJobs';

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

/** The reads (Admin.listWorkers, alerts, namespaces) of a client of `context.namespace`. */
export function fleetReads(context: AdminContext): Pick<Admin, 'listWorkers' | 'alerts' | 'namespaces'> {
  const { nsOf, dbOf, run } = context;
  return {
    listWorkers: async (given) => {
      const options = optionsOf('listWorkers', given);
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
    alerts: async (given) => {
      const options = optionsOf('alerts', given);
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
