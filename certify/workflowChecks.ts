/**
 * The workflow part of the certification verdict, a pure function of the ledger
 * (docs/workflows.md; test/certify/checker.spec.ts).
 *
 * Signals: a signal wait's step answered by a signal holds exactly one consumed signal, and each
 * consumed signal's step is one the job recorded; a timed-out wait was woken no earlier than its
 * timeout after the parking attempt's claim; no signal is left unconsumed (the certification's
 * signalled jobs wait until they consume the one signal the run sends them: certify/jobs.ts).
 * Children: each child row is listed once in its parent's spawn steps, and each listed child
 * exists (no child spawned twice, none lost); every attempt after a children wait's park was
 * claimed after every child spawned by then ended. Both: no attempt after a park was claimed
 * before the wait's step was recorded (a parked job runs again only once its wait is answered).
 *
 * A wait's step (`acta:signal:<n>`, `acta:children:<n>`) is recorded by the wake, not by an
 * attempt: it carries the parking attempt's execution number and is recorded when that attempt
 * parked or later (the same transaction when the wait was answered already).
 */
import type { LedgerExecution, LedgerJob, LedgerStep } from './checker';

/** One row of acta.signals. */
export interface LedgerSignal {
  id: string;
  jobId: string;
  /** The wait step that consumed it (null: kept, unconsumed). */
  consumedStep: string | null;
  /** acta.signals.sent_at, ms (for the figures only). */
  sentAt?: number;
}

export type WorkflowViolationKind =
  | 'signal_consumed_twice'
  | 'signal_wait_unanswered'
  | 'signal_consumed_by_no_wait'
  | 'signal_not_consumed'
  | 'signal_timeout_early'
  | 'resumed_before_wake'
  | 'child_spawned_twice'
  | 'child_missing'
  | 'parent_resumed_early';

/** What the workflows did, from the ledger. */
export interface WorkflowFigures {
  signals: number;
  /** Signal waits recorded, and how many of them timed out. */
  signalWaits: number;
  timeouts: number;
  /** Consumed signals by when they were sent: before the job's first claim, later but before the consuming wait parked, after that park. */
  sentBeforeClaim: number;
  sentBeforePark: number;
  sentWhileParked: number;
  /** Consumed by a wait that followed a timed-out one. */
  consumedAfterTimeout: number;
  children: number;
  /** Parks of a children wait (each followed by a resume once the children ended). */
  childrenWaits: number;
}

/** A wait's step: recorded by the wake (acta.wake_job), for the attempt that parked. */
export const isWaitStep = (name: string): boolean => name.startsWith('acta:signal:') || name.startsWith('acta:children:');
const PARKS = ['signal_wait', 'children_wait'];
const ENDS = ['succeeded', 'failed_final', 'cancelled'];
const timedOut = (s: LedgerStep) => (s.result as { timedOut?: boolean } | null | undefined)?.timedOut === true;

type Flag = (kind: WorkflowViolationKind, jobId: string, detail: string) => void;

export function checkWorkflows(
  jobs: LedgerJob[],
  executionsByJob: Map<string, LedgerExecution[]>,
  steps: LedgerStep[],
  signals: LedgerSignal[],
  flag: Flag,
): { signalsConsumed: number; parents: number; figures: WorkflowFigures } {
  const jobById = new Map(jobs.map((j) => [j.id, j]));
  const stepsByJob = new Map<string, LedgerStep[]>();
  for (const s of steps) if (s.name.startsWith('acta:')) stepsByJob.set(s.jobId, [...(stepsByJob.get(s.jobId) ?? []), s]);
  const attempts = (jobId: string) => executionsByJob.get(jobId) ?? [];
  const figures: WorkflowFigures = { signals: signals.length, signalWaits: 0, timeouts: 0, sentBeforeClaim: 0, sentBeforePark: 0, sentWhileParked: 0, consumedAfterTimeout: 0, children: 0, childrenWaits: 0 };

  // Every park: the next attempt is claimed only after the wait's step was recorded.
  for (const [jobId, list] of executionsByJob) {
    for (const park of list.filter((a) => PARKS.includes(a.outcome))) {
      const resume = list.find((a) => a.execution === park.execution + 1);
      if (!resume) continue; // still parked: job_not_succeeded's
      const wake = (stepsByJob.get(jobId) ?? []).find((s) => s.execution === park.execution && isWaitStep(s.name));
      if (!wake || resume.claimedAt < wake.recordedAt) flag('resumed_before_wake', jobId, `execution ${resume.execution} claimed ${wake ? `${wake.recordedAt - resume.claimedAt} ms before its wait ${wake.name} was answered` : 'with no wait answered'} (parked by execution ${park.execution})`);
    }
  }

  // Signals.
  const consumedBy = new Map<string, LedgerSignal[]>();
  for (const s of signals) {
    if (s.consumedStep === null) {
      flag('signal_not_consumed', s.jobId, `signal ${s.id} left in the mailbox`);
      continue;
    }
    const key = `${s.jobId}/${s.consumedStep}`;
    consumedBy.set(key, [...(consumedBy.get(key) ?? []), s]);
  }
  const recorded = new Map(steps.map((s) => [`${s.jobId}/${s.name}`, s]));
  for (const [key, consumed] of consumedBy) {
    const [jobId, name] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
    if (consumed.length > 1) flag('signal_consumed_twice', jobId, `wait ${name} consumed signals ${consumed.map((s) => s.id).join(', ')}`);
    const step = recorded.get(key);
    if (!step) {
      flag('signal_consumed_by_no_wait', jobId, `signal ${consumed[0].id} consumed by ${name}, which the job never recorded`);
      continue;
    }
    const list = attempts(jobId);
    const firstClaim = Math.min(...list.map((a) => a.claimedAt));
    const park = list.find((a) => a.execution === step.execution);
    const sentAt = consumed[0].sentAt ?? 0;
    if (sentAt < firstClaim) figures.sentBeforeClaim++;
    else if (park && sentAt < park.finishedAt) figures.sentBeforePark++;
    else figures.sentWhileParked++;
    if (!name.endsWith(':0') && (stepsByJob.get(jobId) ?? []).some((s) => s.name.startsWith('acta:signal:') && timedOut(s))) figures.consumedAfterTimeout++;
  }
  for (const s of steps) {
    if (!s.name.startsWith('acta:signal:')) continue;
    figures.signalWaits++;
    if (!timedOut(s)) {
      if (!consumedBy.has(`${s.jobId}/${s.name}`)) flag('signal_wait_unanswered', s.jobId, `wait ${s.name} recorded with no signal consumed for it`);
      continue;
    }
    figures.timeouts++;
    const park = attempts(s.jobId).find((a) => a.execution === s.execution);
    const timeoutMs = jobById.get(s.jobId)?.signalTimeoutMs;
    // The timeout counts from the park's commit, which comes after the attempt's claim.
    if (!park || timeoutMs == null || s.recordedAt < park.claimedAt + timeoutMs) {
      flag('signal_timeout_early', s.jobId, `wait ${s.name} timed out ${park && timeoutMs != null ? `${s.recordedAt - park.claimedAt} ms after its attempt's claim, timeout ${timeoutMs} ms` : 'with no timeout or attempt known'}`);
    }
  }

  // Children: the rows against the spawn steps, and each resume after the park against their ends.
  const children = new Map<string, LedgerJob[]>();
  for (const j of jobs) if (j.parentId) children.set(j.parentId, [...(children.get(j.parentId) ?? []), j]);
  figures.children = [...children.values()].reduce((n, c) => n + c.length, 0);
  const ended = (id: string) => {
    const ends = attempts(id).filter((a) => ENDS.includes(a.outcome));
    return ends.length === 0 ? Infinity : Math.max(...ends.map((a) => a.finishedAt));
  };
  for (const [parentId, kids] of children) {
    const spawns = (stepsByJob.get(parentId) ?? []).filter((s) => s.name.startsWith('acta:spawn:'));
    const listed = spawns.flatMap((s) => ((s.result as { ids?: string[] } | undefined)?.ids ?? []).map((id) => ({ id: String(id), execution: s.execution })));
    const known = spawns.every((s) => s.result !== undefined);
    if (known) {
      const times = new Map<string, number>();
      for (const l of listed) times.set(l.id, (times.get(l.id) ?? 0) + 1);
      for (const kid of kids) if (times.get(kid.id) !== 1) flag('child_spawned_twice', parentId, `child ${kid.id} listed ${times.get(kid.id) ?? 0} times in the parent's spawn steps`);
      const rows = new Set(kids.map((k) => k.id));
      for (const id of times.keys()) if (!rows.has(id)) flag('child_missing', parentId, `child ${id} of a spawn step has no row`);
    }
    for (const park of attempts(parentId).filter((a) => a.outcome === 'children_wait')) {
      figures.childrenWaits++;
      // The children spawned by then: those of spawn steps recorded up to the park (all, if the steps do not say).
      const waited = known ? kids.filter((k) => listed.some((l) => l.id === k.id && l.execution <= park.execution)) : kids;
      const last = waited.reduce((at, k) => Math.max(at, ended(k.id)), -Infinity);
      const lastKid = waited.find((k) => ended(k.id) === last);
      for (const a of attempts(parentId)) {
        if (a.execution > park.execution && a.claimedAt < last) flag('parent_resumed_early', parentId, `execution ${a.execution} claimed ${last === Infinity ? 'before' : `${last - a.claimedAt} ms before`} child ${lastKid?.id} ended`);
      }
    }
  }
  return { signalsConsumed: [...consumedBy.values()].reduce((n, c) => n + c.length, 0), parents: children.size, figures };
}
