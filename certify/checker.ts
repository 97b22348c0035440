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
 *
 * Policies (docs/DESIGN.md, "Policies"): an attempt holds its concurrency key's slot, and its
 * lane, from its claimedAt to its finishedAt (for an attempt lost to recovery, when recovery
 * returned its row: the moment the slot was freed). Intervals are half-open: [a, b) and [b, c)
 * do not overlap.
 *
 * Schedules: a fire (a job with a schedule) is judged by certify/fires.ts instead of "every job
 * Succeeded": one fire per instant, and no gap beyond its schedule's catch-up policy.
 */
import { checkFires, type FireFigures, type FireViolationKind, type LedgerFire, type LedgerSchedule } from './fires';

import { checkWorkflows, isWaitStep, type LedgerSignal, type WorkflowFigures, type WorkflowViolationKind } from './workflowChecks';

export interface LedgerJob {
  id: string;
  status: string;
  execution: number;
  attempts: number;
  /** acta.jobs.concurrency_key (null: none). */
  concurrencyKey: string | null;
  /** The job's definition's concurrency limit as acta.definitions records it (null: none). */
  concurrencyLimit: number | null;
  /** acta.jobs.lane (null: none). */
  lane: string | null;
  /** acta.jobs.lane_seq: the job's place in its lane, taken at its commit (migration 0012); absent or null: its id. */
  lanePosition?: string | null;
  /** acta.jobs.parent_id: the job's parent when it was spawned as a child (absent or null: none). */
  parentId?: string | null;
  /** acta.jobs.schedule and scheduled_at (ms): a schedule's fire; absent or null: a plain job. */
  schedule?: string | null;
  scheduledAt?: number | null;
  /** A certification signalled job's wait timeout, ms (its payload's timeoutMs; absent or null: none). */
  signalTimeoutMs?: number | null;
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
  /** The step's result, read for workflow steps (`acta:…`) only: a wait's answer, a spawn's {ids}. */
  result?: unknown;
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
  /** acta.signals (absent: none sent). */
  signals?: LedgerSignal[];
  /** acta.schedules (absent: none). */
  schedules?: LedgerSchedule[];
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
  | 'attempts_mismatch'
  | 'key_over_limit'
  | 'lane_out_of_order'
  | WorkflowViolationKind
  | FireViolationKind;

export interface Violation {
  kind: ViolationKind;
  jobId: string;
  detail: string;
}

export interface Verdict {
  ok: boolean;
  counts: {
    /** Plain jobs (a schedule's fires are counted in `fires`), and how many succeeded. */
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
    /** Jobs with a concurrency key whose definition sets a limit, and their attempts. */
    keyedJobs: number;
    keyedAttempts: number;
    /** Jobs with a lane, and how many lanes. */
    lanedJobs: number;
    lanes: number;
    /** First claim to last end, ms: of all attempts, and of the longest lane's. */
    spanMs: number;
    laneSpanMs: number;
    /** Signals consumed by waits; parents (jobs with children). */
    signalsConsumed: number;
    parents: number;
  };
  /** Per concurrency key, in key order: its limit and the most attempts that held it at once. */
  keys: KeyFigures[];
  /** Per schedule, in name order: its fires, how many ran and were skipped, the longest gap. */
  fires: FireFigures[];
  /** Signals and children (certify/workflowChecks.ts). */
  workflows: WorkflowFigures;
  violations: Violation[];
}

export interface KeyFigures {
  key: string;
  /** The smallest limit among its jobs' definitions (the certification gives each key one). */
  limit: number;
  jobs: number;
  attempts: number;
  /** The most attempts of the key holding a slot at one instant. */
  maxHeld: number;
  /** Its first claim to its last end, ms. */
  spanMs: number;
}

/** First claim to last end of some attempts, ms (0: none). */
function span(attempts: Iterable<LedgerExecution>): number {
  let first = Infinity;
  let last = -Infinity;
  for (const a of attempts) {
    if (a.claimedAt < first) first = a.claimedAt;
    if (a.finishedAt > last) last = a.finishedAt;
  }
  return last > first ? last - first : 0;
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

type Flag = (kind: ViolationKind, jobId: string, detail: string) => void;

/** Job ids are bigints as decimal strings: numeric order without BigInt. */
const byId = (a: { id: string }, b: { id: string }) => a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * `key_over_limit`: a sweep line per key over its attempts' [claimedAt, finishedAt): at each claim
 * the key's held attempts, this one included, must not exceed the limit of this attempt's
 * definition (the limit the claim admitted it under). Ends sort before claims at one instant.
 * Between claims the count only falls, so checking at claims covers every instant.
 */
function checkKeys(jobs: LedgerJob[], executionsByJob: Map<string, LedgerExecution[]>, flag: Flag): KeyFigures[] {
  const figures: KeyFigures[] = [];
  const byKey = groupBy(
    jobs.filter((j) => j.concurrencyKey !== null && j.concurrencyLimit !== null),
    (j) => j.concurrencyKey as string,
  );
  for (const [key, keyJobs] of byKey) {
    // [time, +1 claim | -1 end, limit, attempt]; an empty interval holds nothing.
    const events: [number, 1 | -1, number, LedgerExecution][] = [];
    let attempts = 0;
    for (const job of keyJobs) {
      for (const a of executionsByJob.get(job.id) ?? []) {
        attempts++;
        if (a.finishedAt <= a.claimedAt) continue;
        events.push([a.claimedAt, 1, job.concurrencyLimit as number, a], [a.finishedAt, -1, 0, a]);
      }
    }
    events.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
    let held = 0;
    let maxHeld = 0;
    for (const [at, delta, limit, a] of events) {
      held += delta;
      if (held > maxHeld) maxHeld = held;
      if (delta === 1 && held > limit) flag('key_over_limit', a.jobId, `key ${key}: execution ${a.execution} claimed at ${at} made ${held} attempts holding it, limit ${limit}`);
    }
    figures.push({
      key,
      limit: keyJobs.reduce((min, j) => Math.min(min, j.concurrencyLimit as number), Infinity),
      jobs: keyJobs.length,
      attempts,
      maxHeld,
      spanMs: span(keyJobs.flatMap((j) => executionsByJob.get(j.id) ?? [])),
    });
  }
  return figures.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/**
 * `lane_out_of_order`: per lane, its jobs in commit order (lanePosition, else id; docs/policies.md,
 * "Lanes"); no attempt of a job may be
 * claimed before every attempt of the lane's earlier jobs finished (a running maximum of their
 * finishedAt). Two attempts of different jobs of a lane that overlap always break this for the
 * later job's, so it also means no two attempts of a lane overlap (those of one job: attempts_overlap).
 */
function checkLanes(jobs: LedgerJob[], executionsByJob: Map<string, LedgerExecution[]>, flag: Flag): { lanes: number; longestSpanMs: number } {
  const byLane = groupBy(
    jobs.filter((j) => j.lane !== null),
    (j) => j.lane as string,
  );
  let longestSpanMs = 0;
  for (const [lane, laneJobs] of byLane) {
    longestSpanMs = Math.max(longestSpanMs, span(laneJobs.flatMap((j) => executionsByJob.get(j.id) ?? [])));
    let before = -Infinity; // when the last attempt of the lane's earlier jobs finished
    let beforeJob = '';
    const position = (j: LedgerJob) => ({ id: j.lanePosition ?? j.id });
    for (const job of [...laneJobs].sort((a, b) => byId(position(a), position(b)))) {
      const attempts = executionsByJob.get(job.id) ?? [];
      for (const a of attempts) {
        if (a.claimedAt < before) flag('lane_out_of_order', job.id, `lane ${lane}: execution ${a.execution} claimed ${before - a.claimedAt} ms before job ${beforeJob} (earlier in the lane) finished`);
      }
      for (const a of attempts) {
        if (a.finishedAt > before) {
          before = a.finishedAt;
          beforeJob = job.id;
        }
      }
    }
  }
  return { lanes: byLane.size, longestSpanMs };
}

/** Folds a ledger to a verdict. Pure: same ledger, same verdict. */
export function check(ledger: Ledger): Verdict {
  const violations: Violation[] = [];
  const flag: Flag = (kind, jobId, detail) => violations.push({ kind, jobId, detail });
  const executionsByJob = groupBy(ledger.executions, (e) => e.jobId);
  const stepsByJob = groupBy(ledger.steps, (s) => s.jobId);
  const effectsByJob = groupBy(ledger.effects, (e) => e.jobId);
  let stepRunsUnrecorded = 0;

  for (const job of ledger.jobs) {
    if (job.status !== 'succeeded' && !job.schedule) flag('job_not_succeeded', job.id, `status ${job.status}`);
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
      // A wait's step is recorded by the wake, when its attempt parked or later (workflowChecks.ts).
      const late = isWaitStep(name) ? record.recordedAt < (attempt?.finishedAt ?? Infinity) : record.recordedAt > (attempt?.finishedAt ?? -Infinity);
      if (!attempt || record.recordedAt < attempt.claimedAt || late) {
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

  const keys = checkKeys(ledger.jobs, executionsByJob, flag);
  const lanes = checkLanes(ledger.jobs, executionsByJob, flag);
  const workflows = checkWorkflows(ledger.jobs, executionsByJob, ledger.steps, ledger.signals ?? [], flag);
  const fireJobs: LedgerFire[] = ledger.jobs.filter((j) => j.schedule).map((j) => ({ jobId: j.id, schedule: j.schedule as string, scheduledAt: j.scheduledAt as number, status: j.status }));
  const fires = checkFires(ledger.schedules ?? [], fireJobs, (id) => executionsByJob.get(id) ?? []);
  violations.push(...fires.violations);
  const charged = ledger.executions.filter((e) => e.charged).length;
  return {
    ok: violations.length === 0,
    counts: {
      jobs: ledger.jobs.filter((j) => !j.schedule).length,
      succeeded: ledger.jobs.filter((j) => !j.schedule && j.status === 'succeeded').length,
      attempts: ledger.executions.length,
      charged,
      uncharged: ledger.executions.length - charged,
      recovered: ledger.executions.filter((e) => e.outcome === 'lost' || e.outcome === 'lost_uncharged').length,
      stepsRecorded: ledger.steps.length,
      stepRuns: ledger.effects.length,
      stepRunsUnrecorded,
      keyedJobs: keys.reduce((n, k) => n + k.jobs, 0),
      keyedAttempts: keys.reduce((n, k) => n + k.attempts, 0),
      lanedJobs: ledger.jobs.filter((j) => j.lane !== null).length,
      lanes: lanes.lanes,
      spanMs: span(ledger.executions),
      laneSpanMs: lanes.longestSpanMs,
      signalsConsumed: workflows.signalsConsumed,
      parents: workflows.parents,
    },
    keys,
    fires: fires.figures,
    workflows: workflows.figures,
    violations,
  };
}
