/*
 * The overview: every namespace with its jobs by status (counts capped: COUNT_CAP), the shown
 * namespace's attempts per minute, its pauses with pause and resume, and its in-flight jobs by worker.
 */
import { COUNT_CAP, type NamespaceInfo, type WorkerInfo } from '../../../client/fleetReads';
import type { JobStatus } from '../../../db/types';
import { type Html, html } from '../html';
import type { MinuteCounts } from '../queries';
import { attemptsChart } from './chart';
import { actionButton, ago, href, layout, status, time, type ViewContext } from './layout';
import { shownStatus } from './workers';

const STATUSES: JobStatus[] = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];

const count = (n: number) => (n >= COUNT_CAP ? `≥ ${n.toLocaleString('en')}` : n.toLocaleString('en'));

export function overviewPage(ctx: ViewContext, data: { namespaces: NamespaceInfo[]; minutes: MinuteCounts[]; workers: WorkerInfo[] }, flash?: string | null): Html {
  const ns = data.namespaces.find((n) => n.name === ctx.namespace);
  // Listed alive: the live ones and the silent (gone, not yet marked dead), whose leases still hold their jobs.
  const alive = data.workers.filter((w) => w.status === 'alive');
  const silent = alive.filter((w) => w.silent).length;
  const sum = (k: 'succeeded' | 'failed' | 'other') => data.minutes.reduce((a, m) => a + m[k], 0);
  const pauseForm = ctx.readOnly
    ? ''
    : html`<form method="post" action="${ctx.base}/actions/pause" class="filters"><input type="hidden" name="csrf" value="${ctx.csrf}"><input type="hidden" name="ns" value="${ctx.namespace}"><input type="hidden" name="back" value="${ctx.here}">
<label>definition <input name="definition" placeholder="(the whole namespace)"></label><label>reason <input name="reason"></label><button type="submit" data-action="pause">Pause</button></form>`;
  const body = html`
<h2>Namespaces</h2>
<table id="namespaces"><thead><tr><th>namespace</th>${STATUSES.map((s) => html`<th>${s}</th>`)}<th>oldest due</th><th>oldest paused</th><th>paused</th></tr></thead><tbody>
${data.namespaces.map(
  (n) => html`<tr data-namespace="${n.name}"><td><a href="${href({ ...ctx, namespace: n.name }, '/')}">${n.name}</a></td>
${STATUSES.map((s) => html`<td class="n"><a href="${href({ ...ctx, namespace: n.name }, '/jobs', { status: s })}">${count(n.counts[s])}</a></td>`)}
<td>${ago(n.oldestReadyMs)}</td><td>${ago(n.oldestPausedMs)}</td><td>${n.pauses.map((p) => p.definition ?? '(all)').join(', ')}</td></tr>`,
)}</tbody></table>
<p class="note">Counts stop at ${COUNT_CAP.toLocaleString('en')} per status (≥ means at least). Oldest due: the longest a due job a worker may claim has waited; oldest paused: the same for the due jobs a pause holds, which wait for a resume.</p>

<h2>Attempts in ${ctx.namespace}</h2>
${attemptsChart(data.minutes, `attempts of ${ctx.namespace} per minute`)}
<p id="totals">Last ${data.minutes.length} minutes: <b>${sum('succeeded')}</b> succeeded, <b>${sum('failed')}</b> failed, ${sum('other')} other (parked for a signal or children, rate limited, skipped, cancelled, handed back, lost).</p>

<h2>Pauses</h2>
${
  ns && ns.pauses.length > 0
    ? html`<table id="pauses"><thead><tr><th>scope</th><th>by</th><th>reason</th><th>since</th><th></th></tr></thead><tbody>
${ns.pauses.map((p) => html`<tr data-pause="${p.definition ?? ''}"><td>${p.definition === null ? html`<b>the whole namespace</b>` : p.definition}</td><td>${p.pausedBy}</td><td>${p.reason}</td><td>${time(p.pausedAt)}</td>
<td>${actionButton(ctx, 'resume', 'Resume', { definition: p.definition })}</td></tr>`)}</tbody></table>`
    : html`<p>Not paused.</p>`
}
${pauseForm}

<h2>In flight by worker</h2>
<p id="worker-counts">${alive.length - silent} alive worker${alive.length - silent === 1 ? '' : 's'}, ${silent > 0 ? `${silent} silent past 7 heartbeats (gone, not yet marked dead), ` : ''}${data.workers.length - alive.length} stopped or dead in the last day (<a href="${href(ctx, '/workers')}">all workers</a>).</p>
<table id="inflight"><thead><tr><th>worker</th><th>host</th><th>status</th><th>in flight</th><th>last heartbeat</th></tr></thead><tbody>
${alive.map((w) => html`<tr data-worker="${w.id}"><td><code>${w.id}</code></td><td>${w.hostname}:${w.pid}</td><td>${status(shownStatus(w))}</td><td class="n">${w.holds.length}</td><td>${ago(w.silentMs)} ago</td></tr>`)}
</tbody></table>`;
  return layout(ctx, `Overview`, body, flash);
}
