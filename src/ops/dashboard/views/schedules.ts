/* The namespace's schedules: each one's cron, its armed fire and its last fire, linked to their jobs. */
import type { ScheduleRecord } from '../../../db/schedules';
import { type Html, html } from '../html';
import { href, layout, status, time, type ViewContext } from './layout';

/** Schedules shown on the page (a namespace has a handful; runtime ones can be many). */
export const SCHEDULES_SHOWN = 500;

export function schedulesPage(ctx: ViewContext, schedules: ScheduleRecord[]): Html {
  const job = (id: string | null) => (id === null ? '' : html`<a href="${href(ctx, `/jobs/${id}`)}">${id}</a>`);
  const body = html`<table id="schedules"><thead><tr><th>schedule</th><th>definition</th><th>cron</th><th>catch-up</th><th>source</th><th>next fire</th><th>last fire</th></tr></thead><tbody>
${schedules.slice(0, SCHEDULES_SHOWN).map(
  (s) => html`<tr data-schedule="${s.name}"><td>${s.name}${s.paused ? html` ${status('paused')}` : ''}</td><td>${s.definition}</td><td><code>${s.cron}</code> ${s.timeZone}</td>
<td>${s.catchUp}${s.catchUpWindowMs !== null ? ` (${s.catchUpWindowMs} ms)` : ''}</td><td>${s.source}</td>
<td>${time(s.nextFireAt)} ${job(s.jobId)}</td><td>${time(s.lastFireAt)} ${job(s.lastJobId)} ${s.lastOutcome ? status(s.lastOutcome) : ''}</td></tr>`,
)}</tbody></table>
${schedules.length > SCHEDULES_SHOWN ? html`<p class="note">The first ${SCHEDULES_SHOWN} of ${schedules.length}, by name: <code>acta schedule list</code> lists them all.</p>` : ''}
<p class="note">One fire per scheduled instant, fleet-wide; a fire's completion arms the next (docs/schedules.md). Pause, resume or trigger one with <code>acta schedule</code> or <code>client.schedules</code>.</p>`;
  return layout(ctx, 'Schedules', body);
}
