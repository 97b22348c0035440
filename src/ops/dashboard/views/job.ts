/* One job: its fields, payload, result or error and progress (cut by the database), every attempt, its steps, its why, and its actions. */
import type { WhyAnswer } from '../../../ops/why';
import { attemptsUsed } from '../../attempts';
import { type Html, html } from '../html';
import type { JobDetail, ShownValue } from '../queries';
import { jobActions } from './jobs';
import { bytes, href, layout, status, time, type ViewContext } from './layout';

/** A value's note counts characters as the database cut them (code points: an emoji is one, not two UTF-16 units). */
function value(name: string, v: ShownValue | null): Html | '' {
  if (v === null) return '';
  return html`<h2>${name}</h2><p class="note">${bytes(v.bytes)}${v.truncated ? html`, <b>cut</b>: the first ${[...v.text].length.toLocaleString('en')} characters shown` : ''}</p><pre id="${name.toLowerCase()}">${v.text}</pre>`;
}

/** Where a job's attempt limit comes from, in words (JobRecord.maxAttemptsFrom). */
const LIMIT_FROM = { job: "the job's own", definition: "its definition's", default: 'the default' } as const;

export function jobPage(ctx: ViewContext, job: JobDetail, why: WhyAnswer | null, flash?: string | null): Html {
  const body = html`<p>${status(job.status)} ${jobActions(ctx, job)}</p>
<dl>
<dt>definition</dt><dd>${job.definition}</dd><dt>attempts</dt><dd>${attemptsUsed(job)} of ${job.effectiveMaxAttempts}${job.status === 'executing' ? ', the one running counted' : ''} (${LIMIT_FROM[job.maxAttemptsFrom]}; execution ${job.execution})</dd>
<dt>priority</dt><dd>${job.priority}</dd><dt>due</dt><dd>${time(job.runAt)}</dd><dt>created</dt><dd>${time(job.createdAt)}</dd><dt>finished</dt><dd>${time(job.finishedAt)}</dd>
${job.idempotencyKey ? html`<dt>idempotency key</dt><dd>${job.idempotencyKey}</dd>` : ''}${job.concurrencyKey ? html`<dt>concurrency key</dt><dd>${job.concurrencyKey}</dd>` : ''}
${job.rateKey ? html`<dt>rate key</dt><dd>${job.rateKey}</dd>` : ''}${job.lane ? html`<dt>lane</dt><dd>${job.lane}</dd>` : ''}
${job.leaseHolder ? html`<dt>leased by</dt><dd><code>${job.leaseHolder}</code> until ${time(job.leaseExpiresAt)}</dd>` : ''}
${job.cancelRequestedAt ? html`<dt>cancel requested</dt><dd>${time(job.cancelRequestedAt)}</dd>` : ''}
</dl>
<h2>Why</h2>
<ul id="why">${(why?.reasons ?? []).map(
    (r) => html`<li data-cause="${r.cause}"><b>${r.cause}</b>: ${r.message}${r.blockers && r.blockers.length > 0 ? html` (held by ${r.blockers.map((b) => html`<a href="${href(ctx, `/jobs/${b}`)}">${b}</a> `)})` : ''}</li>`,
  )}</ul>
${value('Payload', job.payload)}${value('Result', job.result)}${value('Error', job.error)}${value('Progress', job.progress)}
<h2>Attempts</h2>
<table id="attempts"><thead><tr><th>execution</th><th>outcome</th><th>charged</th><th>worker</th><th>claimed</th><th>finished</th><th>error</th></tr></thead><tbody>
${job.attemptRows.map((a) => html`<tr><td class="n">${a.execution}</td><td>${a.outcome}</td><td>${a.charged ? 'yes' : 'no'}</td><td><code>${a.workerId}</code></td><td>${time(a.claimedAt)}</td><td>${time(a.finishedAt)}</td><td>${a.error}</td></tr>`)}
</tbody></table>
<p class="note">${job.attemptCount} finished attempt${job.attemptCount === 1 ? '' : 's'}${job.attemptCount > job.attemptRows.length ? html`, the newest ${job.attemptRows.length} shown` : ''}; a running attempt has no row until it ends.</p>
<h2>Steps</h2>
<table id="steps"><thead><tr><th>step</th><th>execution</th><th>recorded</th><th>result</th></tr></thead><tbody>
${job.steps.map((s) => html`<tr><td>${s.name}</td><td class="n">${s.execution}</td><td>${time(s.recordedAt)}</td><td><code>${s.result?.text}</code>${s.result?.truncated ? html` <span class="note">(cut; ${bytes(s.result.bytes)})</span>` : ''}</td></tr>`)}
</tbody></table>
<p class="note">${job.stepCount} step${job.stepCount === 1 ? '' : 's'}${job.stepCount > job.steps.length ? html`, the first ${job.steps.length} by name shown` : ''}.</p>`;
  return layout(ctx, `Job ${job.id}`, body, flash);
}
