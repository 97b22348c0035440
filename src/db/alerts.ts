import type { Queryable } from './Db';
import { WORKER_LIVE_SQL } from './workers';

/** The thresholds acta.evaluate_alerts judges by (docs/alerts.md). */
export interface AlertThresholds {
  /** A worker marked dead is alerted on while its last heartbeat is this recent, ms. */
  deadWindowMs: number;
  /** The oldest due Ready row of a definition waited longer than this, ms. */
  readyAgeMs: number;
  /** The window the failure rate is taken over, ms. */
  failureWindowMs: number;
  /** The Failed share of the jobs that ended in the window, 0..1, at or above which it alerts. */
  failureRate: number;
  /** Fewer jobs ended in the window than this: no failure-rate alert. */
  failureMinJobs: number;
  /** Resolved alerts are forgotten after this, ms. */
  keepResolvedMs: number;
  /** A schedule's armed fire has been due this long and is still not claimed, ms. */
  scheduleLateMs: number;
}

/** A row of acta.alerts as the evaluation returns it. */
export interface AlertRow {
  rule: string;
  subject: string;
  /** What this evaluation did to it. */
  change: 'raised' | 'resolved' | null;
  raisedAt: Date;
  /** null while the alert lasts. */
  resolvedAt: Date | null;
  detail: Record<string, unknown> | null;
}

/** acta.evaluate_alerts: one round trip; every alert of the namespace after it, with this call's changes. */
export async function evaluateAlerts(q: Queryable, args: { namespace: string; thresholds: AlertThresholds; onAlert: string | null }): Promise<AlertRow[]> {
  const t = args.thresholds;
  const { rows } = await q.query<{ rule: string; subject: string; change: AlertRow['change']; raised_at: Date; resolved_at: Date | null; detail: AlertRow['detail'] }>(
    'select * from acta.evaluate_alerts($1, $2, $3, $4, $5, $6, $7, $8, $9)',
    [args.namespace, t.deadWindowMs, t.readyAgeMs, t.failureWindowMs, t.failureRate, t.failureMinJobs, t.keepResolvedMs, t.scheduleLateMs, args.onAlert],
  );
  return rows.map((r) => ({ rule: r.rule, subject: r.subject, change: r.change, raisedAt: r.raised_at, resolvedAt: r.resolved_at, detail: r.detail }));
}

/** The namespace's alerts as stored (for the acta_alert metric): open ones have resolvedAt null. */
export async function readAlerts(q: Queryable, namespace: string): Promise<{ rule: string; subject: string; open: boolean }[]> {
  const { rows } = await q.query<{ rule: string; subject: string; open: boolean }>(
    'select rule, subject, resolved_at is null as open from acta.alerts where namespace = $1 order by rule, subject',
    [namespace],
  );
  return rows;
}

/** An alert as stored (client.alerts, `acta alerts`, the dashboard's alerts view): open while resolvedAt is null. */
export interface AlertInfo {
  namespace: string;
  rule: string;
  subject: string;
  /** When this incident began (the evaluation that raised it). */
  raisedAt: Date;
  /** When it ended; null while it is open. */
  resolvedAt: Date | null;
  /** The rule's values when it was raised (docs/alerts.md, "Rules"): e.g. oldest_ready's ageMs, failure_rate's counts and window. */
  detail: Record<string, unknown> | null;
}

/**
 * The namespace's alerts, open ones first, then the most recently raised (along acta.alerts' key; at
 * most `limit`): the resolved ones still kept too with `resolved`. The one read of client.alerts,
 * hence of `acta alerts` and the dashboard's alerts view.
 */
export async function listAlerts(q: Queryable, args: { namespace: string; resolved: boolean; limit: number }): Promise<AlertInfo[]> {
  const { rows } = await q.query<{ namespace: string; rule: string; subject: string; raised_at: Date; resolved_at: Date | null; detail: AlertInfo['detail'] }>(
    `select namespace, rule, subject, raised_at, resolved_at, detail from acta.alerts where namespace = $1 and ($3::boolean or resolved_at is null)
     order by resolved_at is null desc, raised_at desc, rule, subject limit $2`,
    [args.namespace, args.limit, args.resolved],
  );
  return rows.map((r) => ({ namespace: r.namespace, rule: r.rule, subject: r.subject, raisedAt: r.raised_at, resolvedAt: r.resolved_at, detail: r.detail }));
}

/** Whether anything evaluates the namespace's alerts, as the sys.alerts schedule, acta.pauses and acta.workers say. */
export interface AlertsEvaluation {
  /** Its schedule's row: absent (no worker with alerts has started in the namespace), paused, else active. */
  schedule: 'none' | 'paused' | 'active';
  /** The acta pause holding its fires: '' the namespace's, else its own (the definition's); null: none. */
  heldBy: string | null;
  /** Live workers (WORKER_LIVE_SQL, as acta why and acta workers judge) declaring it. */
  live: number;
  /** The latest stop of one that stopped, or last heartbeat of one dead or silent; null: none ever declared it. */
  lastSeenAt: Date | null;
  /** Its armed fire's due time when that fire is still Ready more than `lateMs` after it; else null. */
  lateDueAt: Date | null;
}

/**
 * The facts the notes of `acta alerts` and the dashboard's Alerts page come from (src/ops/alertsNotes.ts),
 * in one statement: the schedule `name` (sys.alerts, of the definition of that name), its armed
 * fire, the pauses that hold that definition, and the workers that declare it. A worker declares
 * its definitions at every start (acta.workers.definitions) and its row stays, so none live is seen
 * at once after a graceful stop, and 7 H after the last beat after a crash. Reads the schedule, the
 * fire and the pauses by their keys, acta.workers whole.
 */
export async function alertsEvaluation(q: Queryable, namespace: string, name: string, lateMs: number): Promise<AlertsEvaluation> {
  const { rows } = await q.query<{ paused: boolean | null; held_by: string | null; live: number; last_seen_at: Date | null; late_due_at: Date | null }>(
    `select s.paused,
            (select min(p.definition) from acta.pauses p where p.namespace = $1 and p.definition in ('', $2)) as held_by,
            w.live, w.last_seen_at,
            case when j.status = 'ready' and j.run_at < now() - $3 * interval '1 millisecond' then j.run_at end as late_due_at
     from (select (count(*) filter (where w.status = 'alive' and ${WORKER_LIVE_SQL}))::int as live,
                  max(case when w.status = 'stopped' then coalesce(w.stopped_at, w.last_heartbeat_at) else w.last_heartbeat_at end) as last_seen_at
           from acta.workers w where w.namespace = $1 and $2 = any (w.definitions)) w
     left join acta.schedules s on s.namespace = $1 and s.name = $2
     left join acta.jobs j on j.id = s.job_id`,
    [namespace, name, lateMs],
  );
  const r = rows[0];
  return {
    schedule: r.paused === null ? 'none' : r.paused ? 'paused' : 'active',
    heldBy: r.held_by,
    live: r.live,
    lastSeenAt: r.last_seen_at,
    lateDueAt: r.late_due_at,
  };
}
