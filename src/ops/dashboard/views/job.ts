/*
 * One job: its fields and parent, payload, result or error and progress (cut by the database), every
 * attempt, its steps, its children and its signals (a page of each), its why, and its actions.
 */
import type { WhyAnswer } from '../../../ops/why';
import { attemptsUsed } from '../../attempts';
import { type Html, html } from '../html';
import { type ChildRow, FAMILY_COUNT_CAP, FAMILY_PAGE, type FamilyPage, type JobDetail, type ShownValue, type SignalRow } from '../queries';
import { jobActions } from './jobs';
import { bytes, href, layout, status, time, type ViewContext } from './layout';

/** A value's note counts characters as the database cut them (code points: an emoji is one, not two UTF-16 units). */
function value(name: string, v: ShownValue | null): Html | '' {
  if (v === null) return '';
  return html`<h2>${name}</h2><p class="note">${bytes(v.bytes)}${v.truncated ? html`, <b>cut</b>: the first ${[...v.text].length.toLocaleString('en')} characters shown` : ''}</p><pre id="${name.toLowerCase()}">${v.text}</pre>`;
}

/** Where a job's attempt limit comes from, in words (JobRecord.maxAttemptsFrom). */
const LIMIT_FROM = { job: "the job's own", definition: "its definition's", default: 'the default' } as const;

/** A job's children and signals as its page shows them: a page of each, and the cursors the page was opened with. */
export interface JobFamily {
  children: FamilyPage<ChildRow>;
  signals: FamilyPage<SignalRow> & { pending: number };
  /** The `children` and `signals` cursors of the page's address (null: the first page). */
  childrenAfter: string | null;
  signalsAfter: string | null;
}

const FINISHED = ['succeeded', 'failed', 'cancelled'];

/** A count that stopped at FAMILY_COUNT_CAP reads "≥". */
const counted = (n: number, one: string, many: string): string => `${n >= FAMILY_COUNT_CAP ? '≥ ' : ''}${n.toLocaleString('en')} ${n === 1 ? one : many}`;

/** The first-page and next-page links of one list, keeping the other list's cursor. */
function pager(ctx: ViewContext, job: JobDetail, family: JobFamily, list: 'children' | 'signals', next: string | null): Html {
  const other = list === 'children' ? { signals: family.signalsAfter } : { children: family.childrenAfter };
  const after = list === 'children' ? family.childrenAfter : family.signalsAfter;
  return html`${after ? html` · <a href="${href(ctx, `/jobs/${job.id}`, other)}">first page</a>` : ''}${next ? html` · <a id="${list}-next" href="${href(ctx, `/jobs/${job.id}`, { ...other, [list]: next })}">next page</a>` : ''}`;
}

function childrenSection(ctx: ViewContext, job: JobDetail, family: JobFamily): Html {
  const { rows, total, nextCursor } = family.children;
  return html`<h2>Children</h2>
<table id="children"><thead><tr><th>id</th><th>definition</th><th>status</th><th>created</th><th>finished</th><th>last error</th></tr></thead><tbody>
${rows.map((c) => html`<tr data-job="${c.id}" data-status="${c.status}"><td><a href="${href(ctx, `/jobs/${c.id}`)}">${c.id}</a></td><td>${c.definition}</td><td>${status(c.status)}${c.failParent ? html` <span class="note">(fails its parent)</span>` : ''}</td><td>${time(c.createdAt)}</td><td>${time(c.finishedAt)}</td><td>${c.errorMessage}</td></tr>`)}
</tbody></table>
<p class="note">${counted(total, 'child job', 'child jobs')}, in the order spawned, ${FAMILY_PAGE} a page (a deleted child is not listed)${pager(ctx, job, family, 'children', nextCursor)}</p>`;
}

function signalsSection(ctx: ViewContext, job: JobDetail, family: JobFamily): Html {
  const { rows, total, pending, nextCursor } = family.signals;
  // An unconsumed signal of a job that has ended stays so: no wait will take it.
  const unconsumed = FINISHED.includes(job.status) ? 'not consumed' : 'pending';
  return html`<h2>Signals</h2>
<table id="signals"><thead><tr><th>signal</th><th>sent</th><th>consumed</th><th>idempotency key</th><th>payload</th></tr></thead><tbody>
${rows.map((s) => html`<tr data-signal="${s.id}" data-consumed="${s.consumedAt ? 'yes' : 'no'}"><td>${s.name}</td><td>${time(s.sentAt)}</td><td>${s.consumedAt ? html`${time(s.consumedAt)}${s.consumedStep ? html` <span class="note">by step ${s.consumedStep}</span>` : ''}` : html`<span class="s s-waiting">${unconsumed}</span>`}</td><td>${s.idempotencyKey}</td><td><code>${s.payload?.text}</code>${s.payload?.truncated ? html` <span class="note">(cut; ${bytes(s.payload.bytes)})</span>` : ''}</td></tr>`)}
</tbody></table>
<p class="note">${counted(total, 'signal', 'signals')}, ${counted(pending, unconsumed, unconsumed)}, in the order sent, ${FAMILY_PAGE} a page${pager(ctx, job, family, 'signals', nextCursor)}</p>`;
}

export function jobPage(ctx: ViewContext, job: JobDetail, why: WhyAnswer | null, family: JobFamily, flash?: string | null): Html {
  const parent = job.parent;
  const body = html`<p>${status(job.status)} ${jobActions(ctx, job)}</p>
<dl>
${parent ? html`<dt>parent</dt><dd id="parent"><a href="${href(ctx, `/jobs/${parent.id}`)}">${parent.id}</a> ${parent.definition === null ? html`<span class="note">(deleted)</span>` : html`${parent.definition} ${status(parent.status ?? '')}`}</dd>` : ''}
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
<p class="note">${job.stepCount} step${job.stepCount === 1 ? '' : 's'}${job.stepCount > job.steps.length ? html`, the first ${job.steps.length} by name shown` : ''}.</p>
${childrenSection(ctx, job, family)}
${signalsSection(ctx, job, family)}`;
  return layout(ctx, `Job ${job.id}`, body, flash);
}
