/**
 * The workflow part of the certification verdict, a pure function of the ledger
 * (docs/workflows.md; test/certify/checker.spec.ts): every signal a wait consumed is consumed
 * once, by a wait the job recorded, and every wait step recorded for a signal holds exactly one
 * consumed signal; every parent's succeeding attempt was claimed after all its children ended.
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
}

export type WorkflowViolationKind = 'signal_consumed_twice' | 'signal_wait_unanswered' | 'signal_consumed_by_no_wait' | 'parent_resumed_early';

/** A wait's step: recorded by the wake (acta.wake_job), for the attempt that parked. */
export const isWaitStep = (name: string): boolean => name.startsWith('acta:signal:') || name.startsWith('acta:children:');

export function checkWorkflows(
  jobs: LedgerJob[],
  executionsByJob: Map<string, LedgerExecution[]>,
  steps: LedgerStep[],
  signals: LedgerSignal[],
  flag: (kind: WorkflowViolationKind, jobId: string, detail: string) => void,
): { signalsConsumed: number; parents: number } {
  // Signals: each wait step of a signal answered (not a timeout: its job's signals say which) by
  // exactly one consumed signal, and each consumed signal's step recorded for its job.
  const consumedBy = new Map<string, LedgerSignal[]>();
  for (const s of signals) {
    if (s.consumedStep === null) continue;
    const key = `${s.jobId}/${s.consumedStep}`;
    consumedBy.set(key, [...(consumedBy.get(key) ?? []), s]);
  }
  const recorded = new Set(steps.map((s) => `${s.jobId}/${s.name}`));
  for (const [key, consumed] of consumedBy) {
    const [jobId, step] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
    if (consumed.length > 1) flag('signal_consumed_twice', jobId, `wait ${step} consumed signals ${consumed.map((s) => s.id).join(', ')}`);
    if (!recorded.has(key)) flag('signal_consumed_by_no_wait', jobId, `signal ${consumed[0].id} consumed by ${step}, which the job never recorded`);
  }
  const signalled = new Set(signals.map((s) => s.jobId));
  for (const s of steps) {
    if (s.name.startsWith('acta:signal:') && signalled.has(s.jobId) && !consumedBy.has(`${s.jobId}/${s.name}`)) {
      flag('signal_wait_unanswered', s.jobId, `wait ${s.name} recorded with no signal consumed for it`);
    }
  }

  // Children: a parent resumes (its succeeding attempt is claimed) only after every child ended.
  const children = new Map<string, LedgerJob[]>();
  for (const j of jobs) if (j.parentId) children.set(j.parentId, [...(children.get(j.parentId) ?? []), j]);
  for (const [parentId, kids] of children) {
    const success = (executionsByJob.get(parentId) ?? []).find((a) => a.outcome === 'succeeded');
    if (!success) continue; // an unfinished parent is job_not_succeeded's
    for (const kid of kids) {
      const ends = (executionsByJob.get(kid.id) ?? []).filter((a) => ['succeeded', 'failed_final', 'cancelled'].includes(a.outcome));
      const ended = ends.length === 0 ? Infinity : Math.max(...ends.map((a) => a.finishedAt));
      if (success.claimedAt < ended) flag('parent_resumed_early', parentId, `succeeding attempt claimed ${ended === Infinity ? 'before' : `${ended - success.claimedAt} ms before`} child ${kid.id} ended`);
    }
  }
  return { signalsConsumed: [...consumedBy.values()].reduce((n, c) => n + c.length, 0), parents: children.size };
}
