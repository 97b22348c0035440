/*
 * What `acta alerts` says under its table and the dashboard's Alerts page above its table when
 * nothing evaluates the namespace's rules: then an empty list means nothing, and the open alerts are
 * as the last evaluation left them (docs/alerts.md, "Reading them"). One read and one wording for
 * both (test/adminTables.test.ts, test/dashboard/alertsPage.test.ts).
 */
import type { Queryable } from '../db/Db';
import { type AlertsEvaluation, alertsEvaluation } from '../db/alerts';
import { ALERTS_NAME, DEFAULT_SCHEDULE_LATE_MS } from '../recurring/alerts';

/**
 * sys.alerts' armed fire still Ready this long after it was due, a live worker running it: late.
 * Two of its 30 s cadences, schedule_late's default for every other schedule; schedule_late cannot
 * judge this fire, which is the evaluation itself. Its fires have the highest priority, so a
 * worker with a free slot that claims at all takes it first.
 */
export const ALERTS_FIRE_LATE_MS = DEFAULT_SCHEDULE_LATE_MS;

/** The notes (without a `note: ` prefix) for `namespace` from what alertsEvaluation read; none while something evaluates it. */
export function alertsNoteTexts(namespace: string, e: AlertsEvaluation): string[] {
  const ns = `"${namespace}"`;
  if (e.schedule === 'none') return [`sys.alerts is not scheduled in namespace ${ns}: no worker has run it there (acta worker --alerts), so no rule is evaluated`];
  const notes: string[] = [];
  const stale = 'no rule is evaluated, and these alerts are as its last evaluation left them';
  if (e.schedule === 'paused') notes.push(`sys.alerts is paused in namespace ${ns} (acta schedule resume sys.alerts): no rule is evaluated`);
  // A pause of the namespace or of sys.alerts holds its fires as any job's (acta.claim_jobs).
  if (e.heldBy === '') notes.push(`namespace ${ns} is paused, and sys.alerts' fires with it (acta resume): ${stale}`);
  else if (e.heldBy !== null) notes.push(`the jobs of sys.alerts are paused in namespace ${ns} (acta resume --definition sys.alerts): ${stale}`);
  if (e.live === 0) {
    const since = e.lastSeenAt === null ? '' : ` since ${e.lastSeenAt.toISOString()}`;
    notes.push(`no live worker has run sys.alerts in namespace ${ns}${since} (acta worker --alerts starts one): ${stale}`);
  } else if (notes.length === 0 && e.lateDueAt !== null) {
    const they = e.live === 1 ? '1 live worker runs it (all its slots busy, or its claims failing)' : `${e.live} live workers run it (all their slots busy, or their claims failing)`;
    notes.push(`sys.alerts is late in namespace ${ns}: its fire due at ${e.lateDueAt.toISOString()} is not claimed yet, more than ${ALERTS_FIRE_LATE_MS / 1000} s later, though ${they}: ${stale}`);
  }
  return notes;
}

/** The notes for `namespace`: one statement (alertsEvaluation). */
export async function alertsNotes(q: Queryable, namespace: string): Promise<string[]> {
  return alertsNoteTexts(namespace, await alertsEvaluation(q, namespace, ALERTS_NAME, ALERTS_FIRE_LATE_MS));
}
