import type { AlertRow, AlertThresholds } from '../../db/alerts';
import { enqueueJobs } from './jobs';
import { keptWindowMs } from './retention';
import type { Store, Tx } from './state';

/** A row of acta.alerts (migration 0014). */
export interface MemoryAlert {
  namespace: string;
  rule: string;
  subject: string;
  raisedAt: number;
  resolvedAt: number | null;
  detail: Record<string, unknown>;
}

const key = (a: { namespace: string; rule: string; subject: string }) => JSON.stringify([a.namespace, a.rule, a.subject]);

/** acta.evaluate_alerts (sql/functions/evaluate_alerts.sql): the same rules, raises, resolves and onAlert jobs. */
export function evaluateAlerts(store: Store, tx: Tx, args: { namespace: string; thresholds: AlertThresholds; onAlert: string | null }): AlertRow[] {
  const { namespace: ns, thresholds: t } = args;
  const now = tx.now;
  for (const [k, a] of store.alerts) if (a.namespace === ns && a.resolvedAt !== null && a.resolvedAt < now - t.keepResolvedMs) store.alerts.delete(k);

  const jobs = store.jobsIn(ns);
  const workers = [...store.workers.values()].filter((w) => w.namespace === ns);
  const live = new Set(workers.filter((w) => w.status === 'alive').flatMap((w) => w.definitions));
  const holds: { rule: string; subject: string; detail: Record<string, unknown> }[] = [];
  for (const w of workers) {
    if (w.status === 'dead' && w.lastHeartbeatAt > now - t.deadWindowMs) {
      holds.push({ rule: 'worker_dead', subject: w.id, detail: { hostname: w.hostname, pid: w.pid, lastHeartbeatAt: new Date(w.lastHeartbeatAt).toISOString() } });
    }
  }
  // A pause (the definition's or the namespace's, '') holds its due rows for a resume: neither
  // no_live_worker nor oldest_ready for them (evaluate_alerts.sql, the declared step).
  const paused = new Set(store.pausesIn(ns).map((p) => p.definition));
  for (const d of store.allDefinitions()) {
    if (d.namespace !== ns || paused.has('') || paused.has(d.name)) continue;
    let oldest: number | null = null;
    for (const j of jobs) if (j.definition === d.name && j.status === 'ready' && j.blockedBy === null && j.fairTag === null && (oldest === null || j.runAt < oldest)) oldest = j.runAt;
    if (oldest === null) continue;
    if (oldest <= now && !live.has(d.name)) holds.push({ rule: 'no_live_worker', subject: d.name, detail: { oldestDueAt: new Date(oldest).toISOString() } });
    if (oldest < now - t.readyAgeMs) holds.push({ rule: 'oldest_ready', subject: d.name, detail: { oldestDueAt: new Date(oldest).toISOString(), ageMs: now - oldest } });
  }
  // Only the time sys.retention keeps both outcomes (evaluate_alerts.sql, failure_rate's window).
  const windowMs = keptWindowMs(store, ns, t.failureWindowMs);
  const ended = new Map<string, { failed: number; succeeded: number }>();
  for (const j of jobs) {
    if ((j.status !== 'failed' && j.status !== 'succeeded') || j.finishedAt === null || !(j.finishedAt > now - windowMs)) continue;
    const e = ended.get(j.definition) ?? { failed: 0, succeeded: 0 };
    e[j.status]++;
    ended.set(j.definition, e);
  }
  for (const [definition, e] of ended) {
    const total = e.failed + e.succeeded;
    if (e.failed > 0 && total >= t.failureMinJobs && e.failed / total >= t.failureRate) {
      holds.push({ rule: 'failure_rate', subject: definition, detail: { failed: e.failed, succeeded: e.succeeded, windowMs } });
    }
  }

  for (const s of store.schedulesIn(ns)) {
    const j = s.jobId === null ? undefined : store.jobs.get(s.jobId);
    // A paused definition or namespace holds the fire for a resume, as above (evaluate_alerts.sql).
    if (s.paused || !j || j.status !== 'ready' || !(j.runAt < now - t.scheduleLateMs) || paused.has('') || paused.has(j.definition)) continue;
    holds.push({ rule: 'schedule_late', subject: s.name, detail: { definition: s.definition, scheduledAt: new Date(j.scheduledAt as number).toISOString(), dueAt: new Date(j.runAt).toISOString(), lateMs: now - j.runAt } });
  }

  const changed = new Map<string, 'raised' | 'resolved'>();
  const holding = new Set(holds.map((h) => key({ namespace: ns, ...h })));
  for (const h of holds) {
    const k = key({ namespace: ns, ...h });
    const a = store.alerts.get(k);
    if (a && a.resolvedAt === null) continue;
    store.alerts.set(k, { namespace: ns, rule: h.rule, subject: h.subject, raisedAt: now, resolvedAt: null, detail: h.detail });
    changed.set(k, 'raised');
  }
  for (const [k, a] of store.alerts) {
    if (a.namespace === ns && a.resolvedAt === null && !holding.has(k)) {
      a.resolvedAt = now;
      changed.set(k, 'resolved');
    }
  }
  const rows = [...store.alerts.entries()]
    .filter(([, a]) => a.namespace === ns)
    .sort(([, a], [, b]) => (a.rule === b.rule ? (a.subject < b.subject ? -1 : 1) : a.rule < b.rule ? -1 : 1))
    .map(([k, a]): AlertRow => ({ rule: a.rule, subject: a.subject, change: changed.get(k) ?? null, raisedAt: new Date(a.raisedAt), resolvedAt: a.resolvedAt === null ? null : new Date(a.resolvedAt), detail: a.detail }));
  const changes = rows.filter((r) => r.change !== null);
  if (args.onAlert !== null && changes.length > 0) {
    const none = changes.map(() => null);
    const onAlert = args.onAlert;
    const policy = store.definition(ns, onAlert)?.policy;
    enqueueJobs(store, tx, ns, {
      definitions: changes.map(() => onAlert),
      payloads: changes.map((r) => JSON.stringify({ rule: r.rule, subject: r.subject, change: r.change, raisedAt: r.raisedAt, resolvedAt: r.resolvedAt, detail: r.detail })),
      priorities: none,
      runAts: none,
      maxAttempts: none,
      idempotencyKeys: none,
      // Keyed by its name for each policy it declares, as stored (evaluate_alerts.sql, onAlert).
      concurrencyKeys: changes.map(() => (policy?.concurrency ? onAlert : null)),
      rateKeys: changes.map(() => (policy?.rate ? onAlert : null)),
      lanes: changes.map(() => (policy?.lane === true ? onAlert : null)),
    });
  }
  return rows;
}

/** The namespace's alerts as stored (src/db/alerts.ts readAlerts). */
export function readAlerts(store: Store, namespace: string): { rule: string; subject: string; open: boolean }[] {
  return [...store.alerts.values()]
    .filter((a) => a.namespace === namespace)
    .sort((a, b) => (a.rule === b.rule ? (a.subject < b.subject ? -1 : 1) : a.rule < b.rule ? -1 : 1))
    .map((a) => ({ rule: a.rule, subject: a.subject, open: a.resolvedAt === null }));
}
