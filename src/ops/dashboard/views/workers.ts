/* The workers of the namespace: alive, stopped and dead (of the last day), each with what it holds. */
import type { WorkerInfo } from '../../../client/fleetReads';
import { type Html, html } from '../html';
import { ago, href, layout, status, time, type ViewContext } from './layout';

const HELD_SHOWN = 20;

/** As acta workers shows it: a worker listed alive but silent past 7 heartbeats is 'silent' (WorkerInfo.silent). */
export const shownStatus = (w: WorkerInfo): string => (w.silent ? 'silent' : w.status);

export function workersPage(ctx: ViewContext, workers: WorkerInfo[]): Html {
  const body = html`<table id="workers"><thead><tr><th>worker</th><th>status</th><th>host</th><th>build</th><th>started</th><th>last heartbeat</th><th>in flight</th><th>definitions</th></tr></thead><tbody>
${workers.map(
  (w) => html`<tr data-worker="${w.id}" data-status="${shownStatus(w)}"><td><code>${w.id}</code></td><td>${status(shownStatus(w))}</td><td>${w.hostname}:${w.pid}</td><td>${w.build}</td><td>${time(w.startedAt)}</td>
<td>${ago(w.silentMs)} ago</td><td>${w.holds.length}${w.holds.length > 0 ? ': ' : ''}${w.holds.slice(0, HELD_SHOWN).map((id) => html`<a href="${href(ctx, `/jobs/${id}`)}">${id}</a> `)}${w.holds.length > HELD_SHOWN ? '…' : ''}</td>
<td>${w.definitions.join(', ')}</td></tr>`,
)}</tbody></table>
<p class="note">A worker silent for 7 heartbeats is gone (shown silent) and marked dead by the next recovery pass of a live worker; its leases return to Ready then.</p>`;
  return layout(ctx, 'Workers', body);
}
