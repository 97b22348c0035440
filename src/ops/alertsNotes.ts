/*
 * What `acta alerts` says under its table and the dashboard's Alerts page above its table when
 * nothing evaluates the namespace's rules: then an empty list means nothing, and the open alerts are
 * as the last evaluation left them (docs/alerts.md, "Reading them"). One read and one wording for
 * both (test/adminTables.test.ts, test/dashboard/alertsPage.test.ts).
 */
import type { Queryable } from '../db/Db';
import { type AlertsEvaluation, alertsEvaluation } from '../db/alerts';
import { ALERTS_NAME } from '../recurring/alerts';

/** The notes (without a `note: ` prefix) for `namespace` from what alertsEvaluation read; none while something evaluates it. */
export function alertsNoteTexts(namespace: string, e: AlertsEvaluation): string[] {
  const ns = `"${namespace}"`;
  if (e.schedule === 'none') return [`sys.alerts is not scheduled in namespace ${ns}: no worker has run it there (acta worker --alerts), so no rule is evaluated`];
  const notes: string[] = [];
  const stale = 'no rule is evaluated, and these alerts are as its last evaluation left them';
  if (e.schedule === 'paused') notes.push(`sys.alerts is paused in namespace ${ns} (acta schedule resume sys.alerts): no rule is evaluated`);
  if (e.live === 0) {
    const since = e.lastSeenAt === null ? '' : ` since ${e.lastSeenAt.toISOString()}`;
    notes.push(`no live worker has run sys.alerts in namespace ${ns}${since} (acta worker --alerts starts one): ${stale}`);
  }
  return notes;
}

/** The notes for `namespace`: one statement (alertsEvaluation). */
export async function alertsNotes(q: Queryable, namespace: string): Promise<string[]> {
  return alertsNoteTexts(namespace, await alertsEvaluation(q, namespace, ALERTS_NAME));
}
