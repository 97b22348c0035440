/* The job list: a filter (status, definition, concurrency key, lane), newest first, a page at a time by keyset. */
import type { JobPage, JobSummary } from '../../../client/listJobs';
import { attemptsCell } from '../../attempts';
import { type Html, html } from '../html';
import { actionButton, href, layout, status, time, type ViewContext } from './layout';

export interface JobsQuery {
  status?: string;
  definition?: string;
  concurrencyKey?: string;
  lane?: string;
  cursor?: string;
}

const STATUSES = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];

/** The actions a job of this status takes: retry a failed or cancelled one, cancel a live one, delete a finished one. */
export function jobActions(ctx: ViewContext, job: Pick<JobSummary, 'id' | 'status'>): Html {
  const s = job.status;
  return html`${s === 'failed' || s === 'cancelled' ? actionButton(ctx, 'retry', 'Retry', { id: job.id }) : ''}${s === 'ready' || s === 'waiting' || s === 'executing' ? actionButton(ctx, 'cancel', 'Cancel', { id: job.id }) : ''}${s === 'succeeded' || s === 'failed' || s === 'cancelled' ? actionButton(ctx, 'delete', 'Delete', { id: job.id }) : ''}`;
}

export function jobsPage(ctx: ViewContext, query: JobsQuery, page: JobPage, flash?: string | null): Html {
  const filter = { status: query.status, definition: query.definition, key: query.concurrencyKey, lane: query.lane };
  const body = html`<form method="get" action="${ctx.base}/jobs" class="filters" id="filters"><input type="hidden" name="ns" value="${ctx.namespace}">
<label>status <select name="status"><option value="">any</option>${STATUSES.map((s) => html`<option value="${s}"${s === query.status ? html` selected` : ''}>${s}</option>`)}</select></label>
<label>definition <input name="definition" value="${query.definition ?? ''}"></label><label>key <input name="key" value="${query.concurrencyKey ?? ''}"></label>
<label>lane <input name="lane" value="${query.lane ?? ''}"></label><button type="submit">Filter</button></form>
<table id="jobs"><thead><tr><th>id</th><th>definition</th><th>status</th><th>attempts</th><th>created</th><th>finished</th><th>key / lane</th><th>last error</th><th></th></tr></thead><tbody>
${page.jobs.map(
  (j) => html`<tr data-job="${j.id}" data-status="${j.status}"><td><a href="${href(ctx, `/jobs/${j.id}`)}">${j.id}</a></td><td>${j.definition}</td><td>${status(j.status)}${j.blockedBy ? html` <span class="note">(${j.blockedBy})</span>` : ''}</td>
<td class="n">${attemptsCell(j)}</td><td>${time(j.createdAt)}</td><td>${time(j.finishedAt)}</td><td>${j.concurrencyKey}${j.lane ? html` lane ${j.lane}` : ''}</td><td>${j.errorMessage}</td><td>${jobActions(ctx, j)}</td></tr>`,
)}</tbody></table>
${page.jobs.length === 0 ? html`<p>No jobs match.</p>` : ''}
<p>${query.cursor ? html`<a href="${href(ctx, '/jobs', filter)}">first page</a> · ` : ''}${page.nextCursor ? html`<a id="next" href="${href(ctx, '/jobs', { ...filter, cursor: page.nextCursor })}">next page</a>` : 'last page'}</p>`;
  return layout(ctx, 'Jobs', body, flash);
}
