/*
 * The namespace's alerts (sys.alerts, docs/alerts.md): open ones first, then the resolved ones still
 * kept; above them, when nothing evaluates the rules, the notes `acta alerts` prints under its table
 * (src/ops/alertsNotes.ts).
 */
import type { AlertInfo } from '../../../db/alerts';
import { type Html, html } from '../html';
import { layout, status, time, type ViewContext } from './layout';

/** `notes`: alertsNotes' texts, each shown as it is worded (escaped as every value). */
export function alertsPage(ctx: ViewContext, alerts: AlertInfo[], limit: number, notes: string[]): Html {
  const open = alerts.filter((a) => a.resolvedAt === null).length;
  const body = html`<p>${open} open${alerts.length >= limit ? html`; the first ${limit} shown` : ''}.</p>
${notes.map((n) => html`<p class="warn" role="status" data-note>${n}</p>`)}
<table id="alerts"><thead><tr><th>rule</th><th>subject</th><th>state</th><th>raised</th><th>resolved</th><th>detail</th></tr></thead><tbody>
${alerts.map(
  (a) => html`<tr data-rule="${a.rule}" data-subject="${a.subject}" data-open="${String(a.resolvedAt === null)}"><td>${a.rule}</td><td>${a.subject}</td><td>${status(a.resolvedAt === null ? 'open' : 'resolved')}</td>
<td>${time(a.raisedAt)}</td><td>${time(a.resolvedAt)}</td><td><code>${a.detail === null ? '' : JSON.stringify(a.detail)}</code></td></tr>`,
)}</tbody></table>
<p class="note">Evaluated every 30 s by a worker started with <code>alerts</code> (<code>acta worker --alerts</code>), while one runs: a note above says when none does; raised once, resolved once; resolved alerts are forgotten after a day (docs/alerts.md).</p>`;
  return layout(ctx, 'Alerts', body);
}
