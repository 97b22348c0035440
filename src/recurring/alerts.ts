import type { Logger } from 'pino';
import { Gauge, type Registry } from 'prom-client';
import { knownKeys, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption } from '../config';
import type { AlertRow, AlertThresholds } from '../db/alerts';
import { INT4_MAX } from '../db/types';
import { type Definition, defineJob } from '../definition';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { MAX_AGE_MS } from './batches';

/**
 * sys.alerts: the namespace's alert rules evaluated in the database (acta.evaluate_alerts, one
 * round trip), each alert raised once per incident and resolved once when its condition clears
 * (docs/alerts.md). A recurring slot per namespace fires it every 30 s (ALERTS_CRON).
 */
export const ALERTS_NAME = 'sys.alerts';
/** Every 30 s (croner's six-field form, seconds first). */
export const ALERTS_CRON = '*/30 * * * * *';
/** Its fires' priority: the highest, so a backlog (which it exists to report) does not hold them back. */
export const ALERTS_PRIORITY = INT4_MAX;

/** worker_dead: alerted on while the dead worker's last heartbeat is this recent, ms. */
export const DEFAULT_DEAD_WINDOW_MS = 15 * 60_000;
/** oldest_ready: a definition's oldest due Ready row waited longer than this, ms. */
export const DEFAULT_READY_AGE_MS = 5 * 60_000;
/** failure_rate: the window, ms. */
export const DEFAULT_FAILURE_WINDOW_MS = 15 * 60_000;
/** failure_rate: the Failed share of the jobs that ended in the window at or above which it alerts. */
export const DEFAULT_FAILURE_RATE = 0.5;
/** failure_rate: fewer jobs ended in the window than this, no alert. */
export const DEFAULT_FAILURE_MIN_JOBS = 10;
/** schedule_late: a schedule's armed fire due this long and not claimed yet, ms (two sys.alerts cadences). */
export const DEFAULT_SCHEDULE_LATE_MS = 60_000;
/** A resolved alert is forgotten (and its metric series dropped) after this, ms. */
export const DEFAULT_KEEP_RESOLVED_MS = 24 * 60 * 60_000;

/** The sys.alerts payload: thresholds over the defaults, stored and versioned with its schedule. */
export interface AlertsPayload extends Partial<AlertThresholds> {}

/** The fields of the sys.alerts payload. */
export const ALERTS_PAYLOAD_KEYS = ['deadWindowMs', 'readyAgeMs', 'failureWindowMs', 'failureRate', 'failureMinJobs', 'keepResolvedMs', 'scheduleLateMs'];

/** The payload over the defaults; throws ConfigError (ACTA_CONFIG) for a field out of range or unknown. */
export function alertThresholds(payload: AlertsPayload | null | undefined): AlertThresholds {
  const p = payload ?? {};
  if (typeof p !== 'object' || Array.isArray(p)) throw new ConfigError(`the ${ALERTS_NAME} payload must be an object { ${ALERTS_PAYLOAD_KEYS.join(', ')} }, got ${JSON.stringify(p)}`);
  knownKeys(`field of the ${ALERTS_NAME} payload`, p, ALERTS_PAYLOAD_KEYS);
  const num = (name: keyof AlertThresholds, fallback: number, min: number, max: number, integer = true): number => {
    const v = p[name];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
      throw new ConfigError(`${name} of the ${ALERTS_NAME} payload must be ${integer ? 'an integer' : 'a number'} ${min}..${max}, got ${JSON.stringify(v)}`);
    }
    return v;
  };
  return {
    deadWindowMs: num('deadWindowMs', DEFAULT_DEAD_WINDOW_MS, 0, MAX_AGE_MS),
    readyAgeMs: num('readyAgeMs', DEFAULT_READY_AGE_MS, 0, MAX_AGE_MS),
    failureWindowMs: num('failureWindowMs', DEFAULT_FAILURE_WINDOW_MS, 1, MAX_AGE_MS),
    failureRate: num('failureRate', DEFAULT_FAILURE_RATE, 0, 1, false),
    failureMinJobs: num('failureMinJobs', DEFAULT_FAILURE_MIN_JOBS, 1, MAX_TIMER_MS),
    keepResolvedMs: num('keepResolvedMs', DEFAULT_KEEP_RESOLVED_MS, 0, MAX_AGE_MS),
    scheduleLateMs: num('scheduleLateMs', DEFAULT_SCHEDULE_LATE_MS, 0, MAX_AGE_MS),
  };
}

/**
 * One evaluation: every rule, the changes logged (warn `alert raised`, info `alert resolved`, with
 * rule, subject and detail) and, with `onAlert`, one job of that definition per change enqueued in
 * the same transaction. Returns every alert of the namespace after it.
 */
export async function runAlertsPass(ledger: Ledger, namespace: string, thresholds: AlertThresholds, options: { onAlert?: string; logger?: Logger } = {}): Promise<AlertRow[]> {
  const rows = await ledger.evaluateAlerts({ namespace, thresholds, onAlert: options.onAlert ?? null });
  for (const a of rows) {
    if (a.change === 'raised') options.logger?.warn({ rule: a.rule, subject: a.subject, detail: a.detail, raisedAt: a.raisedAt }, 'alert raised');
    else if (a.change === 'resolved') options.logger?.info({ rule: a.rule, subject: a.subject, raisedAt: a.raisedAt, resolvedAt: a.resolvedAt }, 'alert resolved');
  }
  return rows;
}

/**
 * `acta_alert{rule,subject}` in `registers` (none: the worker registers it with its own metrics,
 * WorkerMetrics): 1 while the alert lasts, 0 once resolved (until it is
 * forgotten). Read from acta.alerts (ledger.readAlerts) at each scrape, so every worker reports the fleet's alerts as
 * the latest evaluation left them, whichever worker ran it. Subjects are worker ids and definition
 * names, never job ids.
 */
export function alertMetric(ledger: Ledger, namespace: string, registers: Registry[]): Gauge<'rule' | 'subject'> {
  return new Gauge({
    name: 'acta_alert',
    help: 'Alerts of sys.alerts: 1 while raised, 0 once resolved (docs/alerts.md)',
    labelNames: ['rule', 'subject'],
    registers,
    // A failed read leaves the gauge without series for that scrape: the rest of /metrics (among
    // them acta_worker_degraded, wanted most while the database is down) is still served.
    async collect() {
      const alerts = await ledger.readAlerts(namespace).catch(() => null);
      this.reset();
      if (alerts === null) return;
      for (const a of alerts) this.set({ rule: a.rule, subject: a.subject }, a.open ? 1 : 0);
    },
  });
}

/**
 * The sys.alerts definition for `namespace`: its handler evaluates on `ledger` with the fire's payload
 * over the default thresholds; `onAlert` names a definition that gets one job per raise and per
 * resolve, payload { rule, subject, change, raisedAt, resolvedAt, detail }. Throws ConfigError for
 * an onAlert that is not a definition name.
 */
export function alertsDefinition(options: { ledger: Ledger; namespace: string; onAlert?: string }): Definition<AlertsPayload | null, { open: number; raised: number; resolved: number }> {
  knownKeys('alertsDefinition option', options, ['ledger', 'namespace', 'onAlert']);
  const onAlert = options.onAlert === undefined ? undefined : nameOption('onAlert', options.onAlert, MAX_NAME_BYTES);
  return defineJob({
    name: ALERTS_NAME,
    // An evaluation is a sweep: a failed one is simply the next fire's work.
    maxAttempts: 1,
    handler: async (payload, ctx) => {
      const rows = await runAlertsPass(options.ledger, options.namespace, alertThresholds(payload), { onAlert, logger: ctx.logger.child({ pass: 'alerts' }) });
      return {
        open: rows.filter((a) => a.resolvedAt === null).length,
        raised: rows.filter((a) => a.change === 'raised').length,
        resolved: rows.filter((a) => a.change === 'resolved').length,
      };
    },
  });
}
