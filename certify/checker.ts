/**
 * The certification verdict, a pure function of the ledger (test/certify/checker.spec.ts).
 * `check(ledger)` reads only what the database recorded — jobs, executions (one row per
 * attempt), steps (one row per recorded step) and the step side effects the certification jobs
 * log — and never a clock or a worker's state. All times are ms on the database clock.
 *
 * What "a step ran" means: a step's function ran once per entry in `effects`; a step is
 * *recorded* when acta.record_step committed its row. Inside a step delivery is at-least-once:
 * the function may run again in a later attempt if its attempt died before the record
 * committed (an "unrecorded run", allowed and counted). Once recorded it must never run again:
 * an effect of a later execution than the recording one is a violation.
 */

export interface LedgerJob {
  id: string;
  status: string;
  execution: number;
  attempts: number;
}

export interface LedgerExecution {
  jobId: string;
  execution: number;
  workerId: string | null;
  claimedAt: number;
  finishedAt: number;
  /** succeeded | failed | failed_final | handed_back | expired | lost | lost_uncharged */
  outcome: string;
  charged: boolean;
}

export interface LedgerStep {
  jobId: string;
  name: string;
  execution: number;
  recordedAt: number;
}

/** One run of a step's function, logged by the function itself (outside the step's record). */
export interface LedgerEffect {
  jobId: string;
  step: string;
  execution: number;
}

export interface Ledger {
  jobs: LedgerJob[];
  executions: LedgerExecution[];
  steps: LedgerStep[];
  effects: LedgerEffect[];
}

export type ViolationKind =
  | 'job_not_succeeded'
  | 'step_recorded_twice'
  | 'recorded_step_ran_again'
  | 'attempt_number_duplicate'
  | 'attempt_missing'
  | 'attempts_overlap'
  | 'write_not_current'
  | 'success_count'
  | 'attempts_mismatch';

export interface Violation {
  kind: ViolationKind;
  jobId: string;
  detail: string;
}

export interface Verdict {
  ok: boolean;
  counts: {
    jobs: number;
    succeeded: number;
    attempts: number;
    charged: number;
    uncharged: number;
    /** Attempts ended by recovery (their worker was lost). */
    recovered: number;
    stepsRecorded: number;
    stepRuns: number;
    /** Step runs whose record never committed (their attempt died first): at-least-once, allowed. */
    stepRunsUnrecorded: number;
  };
  violations: Violation[];
}

function groupBy<T>(items: T[], key: (t: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(item);
    else out.set(k, [item]);
  }
  return out;
}

/** Folds a ledger to a verdict. Pure: same ledger, same verdict. */
export function check(ledger: Ledger): Verdict {
  const violations: Violation[] = [];
  const flag = (kind: ViolationKind, jobId: string, detail: string) => violations.push({ kind, jobId, detail });
  const executionsByJob = groupBy(ledger.executions, (e) => e.jobId);
  const stepsByJob = groupBy(ledger.steps, (s) => s.jobId);
  const effectsByJob = groupBy(ledger.effects, (e) => e.jobId);
  let stepRunsUnrecorded = 0;

  for (const job of ledger.jobs) {
    if (job.status !== 'succeeded') flag('job_not_succeeded', job.id, `status ${job.status}`);
    const attempts = [...(executionsByJob.get(job.id) ?? [])].sort((a, b) => a.execution - b.execution);

    // Attempt numbers: unique, and exactly 1..execution for a finished job.
    const numbers = new Set<number>();
    for (const a of attempts) {
      if (numbers.has(a.execution)) flag('attempt_number_duplicate', job.id, `execution ${a.execution} appears twice`);
      numbers.add(a.execution);
    }
    if (job.status === 'succeeded' || job.status === 'failed') {
      for (let n = 1; n <= job.execution; n++) if (!numbers.has(n)) flag('attempt_missing', job.id, `no ledger row for execution ${n} of ${job.execution}`);
    }

    // Attempts never overlap: each claim comes after the previous attempt ended.
    for (let i = 1; i < attempts.length; i++) {
      const prev = attempts[i - 1];
      const next = attempts[i];
      if (next.claimedAt < prev.finishedAt) {
        flag('attempts_overlap', job.id, `execution ${next.execution} claimed ${prev.finishedAt - next.claimedAt} ms before execution ${prev.execution} ended`);
      }
    }

    // Exactly one success, written by the row's current (final) execution.
    const successes = attempts.filter((a) => a.outcome === 'succeeded');
    if (job.status === 'succeeded' && successes.length !== 1) flag('success_count', job.id, `${successes.length} succeeded attempts`);
    for (const s of successes) {
      if (s.execution !== job.execution) flag('write_not_current', job.id, `success written by execution ${s.execution}, row is at ${job.execution}`);
    }

    // Charged attempts in the ledger add up to the row's attempts.
    const charged = attempts.filter((a) => a.charged).length;
    if (charged !== job.attempts) flag('attempts_mismatch', job.id, `row says ${job.attempts} attempts, ledger charges ${charged}`);

    // Steps: recorded once, by an attempt that was current when it recorded, never run again.
    const byName = groupBy(stepsByJob.get(job.id) ?? [], (s) => s.name);
    const effectsByStep = groupBy(effectsByJob.get(job.id) ?? [], (e) => e.step);
    for (const [name, records] of byName) {
      if (records.length > 1) flag('step_recorded_twice', job.id, `step ${name} recorded ${records.length} times`);
      const record = records[0];
      const attempt = attempts.find((a) => a.execution === record.execution);
      if (!attempt || record.recordedAt < attempt.claimedAt || record.recordedAt > attempt.finishedAt) {
        flag('write_not_current', job.id, `step ${name} recorded by execution ${record.execution} outside that attempt's lifetime`);
      }
    }
    for (const [name, effects] of effectsByStep) {
      const record = byName.get(name)?.[0];
      for (const effect of effects) {
        if (!record || effect.execution < record.execution) {
          stepRunsUnrecorded++; // its attempt died before the record committed: at-least-once, allowed
        } else if (effect.execution > record.execution) {
          flag('recorded_step_ran_again', job.id, `step ${name} recorded by execution ${record.execution} ran again in execution ${effect.execution}`);
        }
      }
    }
  }

  const charged = ledger.executions.filter((e) => e.charged).length;
  return {
    ok: violations.length === 0,
    counts: {
      jobs: ledger.jobs.length,
      succeeded: ledger.jobs.filter((j) => j.status === 'succeeded').length,
      attempts: ledger.executions.length,
      charged,
      uncharged: ledger.executions.length - charged,
      recovered: ledger.executions.filter((e) => e.outcome === 'lost' || e.outcome === 'lost_uncharged').length,
      stepsRecorded: ledger.steps.length,
      stepRuns: ledger.effects.length,
      stepRunsUnrecorded,
    },
    violations,
  };
}
