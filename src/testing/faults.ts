import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { knownKeys } from '../config';
import type { CompletionAck, HeldPair, JobId } from '../db/types';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { jobIdText } from '../client/jobId';

/** A Ledger call that makes a round trip, by its method's name. */
export type FaultyCall = Exclude<keyof Ledger, 'listen'>;

/** Every FaultyCall: each is guarded by `fail` (the type check below fails when a Ledger call is added and not listed). */
const CALLS = [
  'assertReady', 'registerWorker', 'loadPolicies', 'claimJobs', 'completeExecutions', 'heartbeat', 'recoverJobs', 'releasePasses', 'stopWorker',
  'loadSteps', 'recordStep', 'reportProgress', 'armSchedules', 'listSchedules', 'pauseSchedule', 'pruneJobs', 'evaluateAlerts', 'publishEvents',
  'fanOutEvents', 'readAlerts', 'enqueueJobs', 'readJob', 'cancelJob', 'watchJob', 'readAbsence', 'pause', 'resume', 'listPauses', 'sendSignal', 'spawnChildren',
  'readChildren', 'countJobs',
] as const satisfies readonly FaultyCall[];
const everyCall: Exclude<FaultyCall, (typeof CALLS)[number]> extends never ? true : false = true;
void everyCall;

/** The error an injected failure rejects with: a dropped connection (SQLSTATE 08006), which src/db/transient.ts counts as transient. */
export class InjectedFaultError extends Error {
  readonly code = '08006';
  constructor(call: FaultyCall) {
    super(`Connection terminated unexpectedly (injectFaults: ${call} failed, an injected fault)`);
    this.name = 'InjectedFaultError';
  }
}

/**
 * A job id as the ledger keys it (decimal text), from what the caller gave: a job id as enqueue
 * returned it, a safe integer or a bigint. Throws ConfigError for anything else (an id that names
 * no job would make the fault wait for ever, silently).
 */
function faultJobId(what: string, id: unknown): JobId {
  let text: string | null;
  try {
    text = jobIdText(id);
  } catch (err) {
    throw new ConfigError(`${what}: ${(err as Error).message}`);
  }
  if (text === null) throw new ConfigError(`${what}: no job can have the id ${String(id).slice(0, 40)} (beyond bigint)`);
  return text;
}

/** A ledger with faults to inject, for a worker to run on: `createWorker({ ledger: faults.ledger, … })`. */
export interface Faults {
  readonly ledger: Ledger;
  /**
   * Calls of `calls` fail (reject with InjectedFaultError, a transient error) and do nothing: the
   * next `times` of them, or all of them for the next `forMs` on the scheduler. E.g. completion
   * writes failing for a while: `fail('completeExecutions', { forMs: 5_000 })`.
   */
  fail(calls: FaultyCall | readonly FaultyCall[], options: { times: number } | { forMs: number }): void;
  /**
   * The job's running attempt loses its lease: its renewals stop reaching the ledger (so the lease
   * runs out there, and a recovery pass returns the row), its worker's next heartbeat hears it lost
   * (the handler's signal aborts, reason 'lost'), and its later writes are fenced out (answered
   * stale, not written). Applies to the attempt holding the job now, or to its next one.
   */
  loseLease(jobId: JobId): void;
  /**
   * The job's attempt (the one holding it now, or its next) is delivered twice: its renewals stop
   * reaching the ledger, but its worker hears them renewed, so its handler runs on while the lease
   * runs out, a recovery pass returns the row and another claim runs the job again. The first
   * attempt's writes then meet the real fence (or, claimed again by the same worker, the first is
   * superseded and aborted: src/worker/registry.ts, addClaimed).
   */
  deliverTwice(jobId: JobId): void;
  /**
   * An attempt dies right after it recorded step `name` (of job `jobId`, or of any job), as a
   * process killed there would: the record commits, and its answer comes back stale, so the handler
   * stops at that step (the attempt is aborted as lost: src/worker/steps.ts); nothing more of it reaches
   * the ledger (its renewals stop, its completion is fenced out unwritten), and the row comes back
   * by recovery once its lease runs out, its step recorded.
   */
  crashAfterStep(name: string, options?: { jobId?: JobId }): void;
}

/**
 * Wraps `ledger` (sqlLedger(db), a memoryLedger) with faults (docs/rx.md, "Testing in virtual
 * time"; acta/testing). They act at the ledger's boundary, so they work on every engine: a lost
 * lease is a worker whose renewals stop landing, a crash is an attempt of which nothing more lands.
 * `scheduler`: the clock of `forMs` (default the real one; a VirtualClock's in virtual time).
 */
export function injectFaults(ledger: Ledger, options: { scheduler?: SchedulerLike } = {}): Faults {
  knownKeys('injectFaults option', options, ['scheduler']);
  const scheduler = options.scheduler ?? asyncScheduler;
  const failing = new Map<FaultyCall, { times: number } | { until: number }>();
  /** Attempts whose renewals and writes no longer land, by `${jobId}:${execution}`; `hidden`: the worker still hears them renewed. */
  const cut = new Map<string, { hidden: boolean }>();
  /** Jobs whose next (or current) attempt is to be cut, and how. */
  const pending = new Map<JobId, { hidden: boolean }>();
  /** The attempt holding each job now, as the claims answered. */
  const holding = new Map<JobId, number>();
  const crashes: { name: string; jobId?: JobId }[] = [];
  const pair = (id: JobId, execution: number) => `${id}:${execution}`;

  const failsNow = (call: FaultyCall): boolean => {
    const f = failing.get(call);
    if (!f) return false;
    if ('times' in f) {
      if (f.times <= 0) return false;
      f.times--;
      return true;
    }
    if (scheduler.now() < f.until) return true;
    failing.delete(call);
    return false;
  };
  const guard = <A extends unknown[], R>(call: FaultyCall, run: (...args: A) => Promise<R>) => (...args: A): Promise<R> =>
    failsNow(call) ? Promise.reject(new InjectedFaultError(call)) : run(...args);
  const cutNow = (id: JobId, how: { hidden: boolean }) => {
    const execution = holding.get(id);
    if (execution === undefined) pending.set(id, how);
    else cut.set(pair(id, execution), how);
  };

  // Every call fails when told to (`fail`); the ones below also carry the lease faults.
  const plain: Partial<Ledger> = {};
  for (const call of CALLS) {
    const run = ledger[call] as ((...args: unknown[]) => Promise<unknown>) | undefined;
    if (run) (plain as Record<string, unknown>)[call] = guard(call, (...args: unknown[]) => run.apply(ledger, args));
  }
  const wrapped: Ledger = {
    ...ledger,
    ...plain,
    // A cut attempt's progress and spawns are fenced out unwritten, as its steps are.
    reportProgress: guard('reportProgress', (workerId, rows) => {
      const through = rows.filter((r) => !cut.get(pair(r.id, r.execution)) || cut.get(pair(r.id, r.execution))?.hidden);
      return through.length > 0 ? ledger.reportProgress(workerId, through) : Promise.resolve(0);
    }),
    spawnChildren: guard('spawnChildren', async (args) => {
      const c = cut.get(pair(args.parentId, args.execution));
      if (c && !c.hidden) return { status: 'stale', result: null };
      return ledger.spawnChildren(args);
    }),
    claimJobs: guard('claimJobs', async (args) => {
      const answer = await ledger.claimJobs(args);
      for (const row of answer.rows) {
        holding.set(row.id, row.execution);
        const how = pending.get(row.id);
        if (how) {
          pending.delete(row.id);
          cut.set(pair(row.id, row.execution), how);
        }
      }
      return answer;
    }),
    heartbeat: guard('heartbeat', async (args) => {
      const reaching: HeldPair[] = [];
      const lost: HeldPair[] = [];
      const renewed: HeldPair[] = [];
      for (const h of args.held) {
        const c = cut.get(pair(h.id, h.execution));
        if (!c) reaching.push(h);
        else (c.hidden ? renewed : lost).push(h);
      }
      const answer = await ledger.heartbeat({ ...args, held: reaching });
      return { ...answer, renewed: [...answer.renewed, ...renewed], lost: [...answer.lost, ...lost] };
    }),
    completeExecutions: guard('completeExecutions', async (workerId, rows) => {
      // A cut attempt's completion is fenced out unwritten, unless it was only hidden (then the
      // ledger's own fence decides).
      const through = rows.filter((r) => !cut.get(pair(r.id, r.execution)) || cut.get(pair(r.id, r.execution))?.hidden);
      const acks = through.length > 0 ? await ledger.completeExecutions(workerId, through) : [];
      const byPair = new Map(acks.map((a) => [pair(a.id, a.execution), a]));
      return rows.map((r): CompletionAck => byPair.get(pair(r.id, r.execution)) ?? { id: r.id, execution: r.execution, status: 'stale' });
    }),
    recordStep: guard('recordStep', async (args) => {
      const c = cut.get(pair(args.jobId, args.execution));
      if (c && !c.hidden) return { status: 'stale', result: null };
      const record = await ledger.recordStep(args);
      const crash = crashes.findIndex((k) => k.name === args.name && (k.jobId === undefined || k.jobId === args.jobId));
      if (record.status === 'recorded' && crash >= 0) {
        crashes.splice(crash, 1);
        cut.set(pair(args.jobId, args.execution), { hidden: false });
        return { status: 'stale', result: null };
      }
      return record;
    }),
  };

  return {
    ledger: wrapped,
    fail(calls, how) {
      // Exactly one of the two: with both, one would be dropped without a word.
      if (how === null || typeof how !== 'object') throw new ConfigError('fail: options are { times } or { forMs }');
      knownKeys('fail option', how, ['times', 'forMs']);
      if ('times' in how === 'forMs' in how) throw new ConfigError('fail: give either times or forMs, not both (nor neither)');
      const n = 'times' in how ? how.times : how.forMs;
      if (!Number.isInteger(n) || n < 0) throw new ConfigError(`fail: ${'times' in how ? 'times' : 'forMs'} must be an integer ≥ 0, got ${n}`);
      for (const call of typeof calls === 'string' ? [calls] : calls) {
        if (!(call in wrapped) || (call as string) === 'listen') throw new ConfigError(`fail: no ledger call "${call}"`);
        failing.set(call, 'times' in how ? { times: how.times } : { until: scheduler.now() + how.forMs });
      }
    },
    loseLease: (jobId) => cutNow(faultJobId('loseLease', jobId), { hidden: false }),
    deliverTwice: (jobId) => cutNow(faultJobId('deliverTwice', jobId), { hidden: true }),
    crashAfterStep(name, opts = {}) {
      if (typeof name !== 'string' || name.length === 0) throw new ConfigError('crashAfterStep: a step needs a non-empty name');
      knownKeys('crashAfterStep option', opts ?? {}, ['jobId']);
      crashes.push({ name, jobId: opts?.jobId === undefined ? undefined : faultJobId('crashAfterStep', opts.jobId) });
    },
  };
}
