import type { SchedulerLike } from 'rxjs';
import { knownKeys } from '../config';
import type { Definition } from '../definition';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import type { BatchCarry } from './batches';
import { ALERTS_CRON, ALERTS_PRIORITY, ALERTS_PAYLOAD_KEYS, alertsDefinition, alertThresholds, type AlertsPayload } from './alerts';
import { OUTBOX_CRON, outboxDefinition, type OutboxPayload, outboxSettings } from './outbox';
import { RETENTION_CRON, retentionDefinition, type RetentionPayload, retentionSettings } from './retention';

/**
 * Which of acta's own recurring definitions a worker declares, each with its settings (its
 * schedule's payload) or `true` for the defaults. Opt-in: a worker declares neither unless asked
 * (`acta worker --retention --alerts --outbox`; docs/retention.md, docs/alerts.md, docs/outbox.md).
 */
export interface SystemOptions {
  /** sys.retention: deletes finished jobs past their state's age (default ages: succeeded and cancelled 1 day, failed 7 days). */
  retention?: RetentionPayload | boolean;
  /** sys.alerts: its thresholds, and `onAlert`, a definition that gets a job per raise and resolve. */
  alerts?: (AlertsPayload & { onAlert?: string }) | boolean;
  /** sys.outbox: fans published events out to their subscribers at each publish and every 10 s (docs/outbox.md); its batch settings. */
  outbox?: OutboxPayload | boolean;
}

/** The `outbox` option's settings, or undefined when not asked; throws ConfigError for bad ones. */
export function outboxOption(outbox: SystemOptions['outbox']): OutboxPayload | undefined {
  if (outbox === undefined || outbox === false) return undefined;
  if (outbox !== true && (outbox === null || typeof outbox !== 'object')) throw new ConfigError('outbox must be true, false or an object of batch settings');
  const payload = outbox === true ? {} : outbox;
  outboxSettings(payload);
  return payload;
}

/**
 * acta's own recurring definitions (docs/DESIGN.md, "Workflows": sys.retention, sys.alerts and
 * sys.outbox are recurring slots like any schedule), those the worker's options ask for, each with
 * its `schedule` (whose payload carries the settings, stored and reconciled with the namespace's
 * schedules: the newest build's declaration wins), so whichever worker is free runs each fire.
 * Throws ConfigError for settings out of range, before anything is written.
 */
export function systemDefinitions(options: { ledger: Ledger; namespace: string; scheduler?: SchedulerLike; outboxCarry?: BatchCarry } & SystemOptions): Definition[] {
  const out: Definition[] = [];
  const asked = (v: unknown) => v !== undefined && v !== false;
  if (asked(options.retention)) {
    if (options.retention !== true && (options.retention === null || typeof options.retention !== 'object')) throw new ConfigError('retention must be true, false or an object of ages');
    const payload = options.retention === true ? {} : (options.retention as RetentionPayload);
    retentionSettings(payload); // checked now: a bad setting is the worker's error, not every fire's
    out.push({ ...retentionDefinition(options), schedule: { name: 'sys.retention', cron: RETENTION_CRON, payload } } as Definition);
  }
  if (asked(options.alerts)) {
    if (options.alerts !== true && (options.alerts === null || typeof options.alerts !== 'object' || Array.isArray(options.alerts))) throw new ConfigError('alerts must be true, false or an object of thresholds and onAlert');
    const given = options.alerts === true ? {} : (options.alerts as AlertsPayload & { onAlert?: string });
    knownKeys('alerts option', given, ['onAlert', ...ALERTS_PAYLOAD_KEYS]);
    const { onAlert, ...thresholds } = given;
    // onAlert's jobs carry the alert payload (docs/alerts.md): a "sys." definition is acta's own,
    // which checks its own payload and would fail each one, the notification lost.
    if (typeof onAlert === 'string' && onAlert.startsWith('sys.')) throw new ConfigError(`alerts.onAlert must name a definition of yours that takes the alert payload, got ${JSON.stringify(onAlert)}: names beginning "sys." are acta's system definitions`);
    alertThresholds(thresholds);
    out.push({ ...alertsDefinition({ ledger: options.ledger, namespace: options.namespace, onAlert }), schedule: { name: 'sys.alerts', cron: ALERTS_CRON, payload: thresholds, priority: ALERTS_PRIORITY } } as Definition);
  }
  const outbox = outboxOption(options.outbox);
  if (outbox) out.push({ ...outboxDefinition({ ...options, carry: options.outboxCarry }), schedule: { name: 'sys.outbox', cron: OUTBOX_CRON, payload: outbox } } as Definition);
  return out;
}
