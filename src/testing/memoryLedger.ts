import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { knownKeys, schedulerOption } from '../config';
import type { ListenHandlers } from '../db/Db';
import { ConfigError } from '../errors';
import type { Ledger } from '../ledger';
import { listPauses, pause, resume } from './memory/pauses';
import { claimJobs } from './memory/claim';
import { evaluateAlerts, readAlerts } from './memory/alerts';
import { fanOutEvents, publishEvents } from './memory/outbox';
import { pruneJobs, readAbsence } from './memory/retention';
import { cancelJob, completeExecutions, countJobs, enqueueJobs, loadSteps, readJob, recordStep, recoverJobs, reportProgress, watchJob } from './memory/jobs';
import { copyJson, type MemoryDefinition, type MemoryEvent, type MemoryExecution, type MemoryGate, type MemoryJob, type MemoryMeterStart, type MemoryNamespace, type MemoryPass, type MemoryPause, type MemorySchedule, type MemorySignal, type MemoryStep, type MemoryWorker, Store, type Tx } from './memory/state';
import { heartbeat, loadPolicies, registerWorker, releasePasses, stopWorker } from './memory/workers';
import { readChildren, sendSignal, spawnChildren } from './memory/workflows';
import { armSchedules, listSchedules, pauseSchedule } from './memory/schedules';

export type { GateKind, MemoryDefinition, MemoryEvent, MemoryExecution, MemoryGate, MemoryJob, MemoryMeterStart, MemoryNamespace, MemoryPass, MemoryPause, MemorySchedule, MemoryStep, MemoryWorker } from './memory/state';

/** A call of the Ledger, by its method's name. */
export type LedgerCall = keyof Ledger;
/** The round trips, the calls faults apply to (`listen` is in effect at once and never fails). */
export type LedgerRoundTrip = Exclude<LedgerCall, 'listen'>;

/** ms until an answer arrives: one for every call, or per call (absent: 0). */
export type LedgerLatency = number | Partial<Record<LedgerCall, number>>;

export interface MemoryLedgerOptions {
  /** The ledger's clock: now() is `scheduler.now()` (ms), and answers arrive on it. Default `asyncScheduler`. */
  scheduler?: SchedulerLike;
  /** ms from a call to its answer on the scheduler. Default 0. */
  latencyMs?: LedgerLatency;
}

/** Everything the ledger holds, copied: acta's tables as records, times in ms on its scheduler. */
export interface MemoryLedgerState {
  jobs: MemoryJob[];
  executions: MemoryExecution[];
  steps: MemoryStep[];
  gates: MemoryGate[];
  meterStarts: MemoryMeterStart[];
  workers: MemoryWorker[];
  definitions: MemoryDefinition[];
  namespaces: MemoryNamespace[];
  passes: MemoryPass[];
  pauses: MemoryPause[];
  signals: MemorySignal[];
  schedules: MemorySchedule[];
  /** acta.outbox: events not fanned out yet. */
  events: MemoryEvent[];
}

/** The in-memory ledger: a Ledger, its state for assertions, and its fault knobs. */
export interface MemoryLedger extends Ledger {
  /** A copy of everything it holds now. */
  state(): MemoryLedgerState;
  /** The latency of the calls made from now on. */
  setLatency(latencyMs: LedgerLatency): void;
  /**
   * Calls of `calls` fail with a transient error (SQLSTATE 08006, as a dropped connection: see
   * src/db/transient.ts) and change nothing: the next `times` of them, or every one for the next
   * `forMs` on the scheduler. Their rejections arrive after the call's latency, as answers do.
   */
  failCalls(calls: LedgerRoundTrip | readonly LedgerRoundTrip[], options: { times: number } | { forMs: number }): void;
  /**
   * The next `times` answers of `calls` are lost: the call takes effect (as a commit whose answer a
   * lost connection never brought back), and its promise rejects with the transient error.
   */
  loseAnswers(calls: LedgerRoundTrip | readonly LedgerRoundTrip[], options: { times: number }): void;
}

/** The error of an injected fault: a connection that dropped (SQLSTATE class 08: transient). */
export class InjectedConnectionError extends Error {
  readonly code = '08006';
  constructor(call: LedgerRoundTrip, what: 'failed' | 'answer lost') {
    super(`Connection terminated unexpectedly (memoryLedger: ${call} ${what}, an injected fault)`);
    this.name = 'InjectedConnectionError';
  }
}

const ROUND_TRIPS: readonly LedgerRoundTrip[] = [
  'assertReady',
  'registerWorker',
  'loadPolicies',
  'claimJobs',
  'completeExecutions',
  'heartbeat',
  'recoverJobs',
  'releasePasses',
  'stopWorker',
  'loadSteps',
  'recordStep',
  'enqueueJobs',
  'readJob',
  'cancelJob',
  'watchJob',
  'readAbsence',
  'reportProgress',
  'pause',
  'resume',
  'listPauses',
  'sendSignal',
  'spawnChildren',
  'readChildren',
  'pruneJobs',
  'evaluateAlerts',
  'readAlerts',
  'countJobs',
  'publishEvents',
  'fanOutEvents',
  'armSchedules',
  'listSchedules',
  'pauseSchedule',
];

/**
 * A Ledger (src/ledger.ts) in memory that makes the decisions of the SQL functions of sql/functions/:
 * the claim's order and admission (lanes, concurrency keys, rate meters, fair turns), parking and
 * release, fencing, the completion's decision table and hand-on, recovery's charging, passes, the
 * policies live workers declare, schedules (their reconciliation, pass and recurring fire),
 * idempotency keys and steps, retention's batches, the alert rules and the outbox's fan-out; and NOTIFY, delivered to
 * `listen('acta_jobs', …)` (a namespace's wakeup, a running job's cancel, a publish) and `listen('acta_job', …)`
 * (a watched job's change) where the SQL notifies. One contract
 * suite runs against it and against `sqlLedger` (test/ledger/contract.ts), for acta's own tests of
 * the worker in virtual time.
 *
 * Time: now() is `scheduler.now()` in ms, the same for the whole call, as a transaction's is. A call
 * takes effect when it is made and its answer arrives `latencyMs` later on the scheduler (under a
 * VirtualTimeScheduler, in virtual time: flush it). Durations are the SQL's (the 2 s bounce, a
 * meter's window, leases).
 *
 * Where it cannot be the SQL exactly:
 * - No concurrency: calls are applied one at a time, whole, so nothing is ever locked. A heartbeat
 *   never answers 'locked', a claim never finds a gate busy or a row locked by another claim (which
 *   SKIP LOCKED would pass over), and a call that fails changes nothing, as a rolled-back transaction.
 * - Timestamps are ms on the scheduler, and two calls at one virtual instant share one now(): a row
 *   handed back then is due at the same time as one enqueued earlier at that instant, where a server's
 *   clock would have moved on (then the id decides). Tests that depend on that order advance the clock.
 * - Where the SQL leaves an order to the plan (which of 10,000 rows a round refused whole parks first,
 *   the order of recovered rows and of passes taken, ties in a worker's start time), this takes id,
 *   lease or registration order.
 * - jsonb is JSON.parse's value with its keys in jsonb's order: NUL and lone surrogates are refused
 *   as jsonb does, big numbers and duplicate keys come back as JSON.parse gives them, and a pg value
 *   arrives the same way.
 */
export function memoryLedger(options: MemoryLedgerOptions = {}): MemoryLedger {
  knownKeys('memoryLedger option', options, ['scheduler', 'latencyMs']);
  const scheduler = schedulerOption(options.scheduler, 'memoryLedger') ?? asyncScheduler;
  let latency = checkLatency(options.latencyMs ?? 0);
  const store = new Store(scheduler.now());
  const listeners = new Set<{ channel: string; handlers: ListenHandlers }>();
  const failing = new Map<LedgerRoundTrip, { times: number } | { until: number }>();
  const losing = new Map<LedgerRoundTrip, number>();

  const latencyOf = (call: LedgerCall) => (typeof latency === 'number' ? latency : (latency[call] ?? 0));
  const arrive = <T>(call: LedgerCall, settle: () => T): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      scheduler.schedule(() => {
        try {
          resolve(settle());
        } catch (err) {
          reject(err);
        }
      }, latencyOf(call));
    });
  const fails = (call: LedgerRoundTrip): boolean => {
    const f = failing.get(call);
    if (!f) return false;
    if ('until' in f) return scheduler.now() < f.until || (failing.delete(call), false);
    if (--f.times <= 0) failing.delete(call);
    return true;
  };
  const loses = (call: LedgerRoundTrip): boolean => {
    const n = losing.get(call) ?? 0;
    if (n <= 0) return false;
    if (n === 1) losing.delete(call);
    else losing.set(call, n - 1);
    return true;
  };
  /** One call: applied whole at the scheduler's now, its wakeups delivered, its answer (or error) after its latency. */
  function call<T>(name: LedgerRoundTrip, effect: (tx: Tx) => T): Promise<T> {
    if (fails(name)) return arrive(name, () => {
      throw new InjectedConnectionError(name, 'failed');
    });
    const woken = new Set<string>();
    // Migration 0009's trigger: a watched job whose status, execution, progress or cancel request
    // the call changed notifies 'acta_job' with its id.
    const watched = new Map<MemoryJob, string>();
    for (const j of store.jobs.values()) if (j.watched) watched.set(j, watchedState(j));
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: effect({ now: scheduler.now(), notify: (payload) => woken.add(payload) }) };
    } catch (error) {
      return arrive(name, () => {
        throw error;
      });
    }
    const changed: string[] = [];
    for (const j of store.jobs.values()) if (j.watched && watched.get(j) !== watchedState(j)) changed.push(String(j.id));
    const deliver = (channel: string, payloads: Iterable<string>) => {
      for (const payload of payloads) {
        for (const l of listeners) if (l.channel === channel) scheduler.schedule(() => listeners.has(l) && l.handlers.onNotify(payload));
      }
    };
    deliver('acta_jobs', woken);
    deliver('acta_job', changed);
    if (loses(name)) outcome = { error: new InjectedConnectionError(name, 'answer lost') };
    return arrive(name, () => {
      if ('error' in outcome) throw outcome.error;
      return outcome.value;
    });
  }
  const forEach = (calls: LedgerRoundTrip | readonly LedgerRoundTrip[], what: string): LedgerRoundTrip[] => {
    const list = typeof calls === 'string' ? [calls] : [...calls];
    for (const c of list) if (!ROUND_TRIPS.includes(c)) throw new ConfigError(`${what}: "${String(c)}" is not a ledger call (one of ${ROUND_TRIPS.join(', ')})`);
    return list;
  };
  const count = (what: string, n: unknown) => {
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw new ConfigError(`${what} must be an integer of at least 1, got ${String(n)}`);
    return n;
  };

  return {
    assertReady: () => call('assertReady', () => undefined),
    registerWorker: (args) => call('registerWorker', (tx) => registerWorker(store, tx, args)),
    loadPolicies: (namespace, names) => call('loadPolicies', () => loadPolicies(store, namespace, names)),
    claimJobs: (args) => call('claimJobs', (tx) => claimJobs(store, tx, args)),
    completeExecutions: (workerId, rows) => call('completeExecutions', (tx) => completeExecutions(store, tx, workerId, rows)),
    heartbeat: (args) => call('heartbeat', (tx) => heartbeat(store, tx, args)),
    recoverJobs: (args) => call('recoverJobs', (tx) => recoverJobs(store, tx, args)),
    releasePasses: (namespace, passes) => call('releasePasses', (tx) => releasePasses(store, tx, namespace, passes)),
    stopWorker: (workerId) => call('stopWorker', (tx) => stopWorker(store, tx, workerId)),
    loadSteps: (jobId) => call('loadSteps', () => loadSteps(store, jobId)),
    recordStep: (args) => call('recordStep', (tx) => recordStep(store, tx, args)),
    enqueueJobs: (namespace, rows) => call('enqueueJobs', (tx) => enqueueJobs(store, tx, namespace, rows)),
    readJob: (namespace, id) => call('readJob', () => readJob(store, namespace, id)),
    cancelJob: (namespace, id) => call('cancelJob', (tx) => cancelJob(store, tx, namespace, id)),
    watchJob: (namespace, id) => call('watchJob', () => watchJob(store, namespace, id)),
    readAbsence: (namespace, id) => call('readAbsence', () => readAbsence(store, namespace, id)),
    reportProgress: (workerId, rows) => call('reportProgress', () => reportProgress(store, workerId, rows)),
    pause: (args) => call('pause', (tx) => pause(store, tx, args)),
    resume: (args) => call('resume', (tx) => resume(store, tx, args)),
    listPauses: (namespace) => call('listPauses', () => listPauses(store, namespace)),
    sendSignal: (args) => call('sendSignal', (tx) => sendSignal(store, tx, args)),
    spawnChildren: (args) => call('spawnChildren', (tx) => spawnChildren(store, tx, args)),
    readChildren: (parentId, ids) => call('readChildren', () => readChildren(store, parentId, ids)),
    pruneJobs: (args) => call('pruneJobs', (tx) => pruneJobs(store, tx, args)),
    evaluateAlerts: (args) => call('evaluateAlerts', (tx) => evaluateAlerts(store, tx, args)),
    readAlerts: (namespace) => call('readAlerts', () => readAlerts(store, namespace)),
    countJobs: (namespace, cap) => call('countJobs', () => countJobs(store, namespace, cap)),
    publishEvents: (namespace, rows) => call('publishEvents', (tx) => publishEvents(store, tx, namespace, rows)),
    fanOutEvents: (args) => call('fanOutEvents', (tx) => fanOutEvents(store, tx, args)),
    armSchedules: (namespace, onUnparsable) => call('armSchedules', (tx) => armSchedules(store, tx, namespace, onUnparsable)),
    listSchedules: (namespace, name) => call('listSchedules', () => listSchedules(store, namespace, name)),
    pauseSchedule: (namespace, name, paused) => call('pauseSchedule', (tx) => pauseSchedule(store, tx, namespace, name, paused)),
    listen(channel, handlers) {
      const listener = { channel, handlers };
      listeners.add(listener);
      return arrive('listen', () => {
        handlers.onConnect?.();
        return async () => void listeners.delete(listener);
      });
    },
    state: () => ({
      jobs: copyJson([...store.jobs.values()]),
      executions: copyJson(store.executions),
      steps: copyJson([...store.steps.values()].flatMap((m) => [...m.values()])),
      gates: copyJson([...store.allGates()]),
      meterStarts: copyJson(store.allMeterStarts()),
      workers: copyJson([...store.workers.values()]),
      definitions: copyJson([...store.allDefinitions()]),
      namespaces: copyJson([...store.namespaces.values()]),
      passes: copyJson([...store.allPasses()]),
      pauses: copyJson([...store.allPauses()]),
      signals: copyJson(store.signals),
      schedules: copyJson([...store.allSchedules()]),
      events: copyJson(store.events),
    }),
    setLatency(latencyMs) {
      latency = checkLatency(latencyMs);
    },
    failCalls(calls, opts) {
      knownKeys('failCalls option', opts, ['times', 'forMs']);
      const list = forEach(calls, 'failCalls');
      // Exactly one of the two, as injectFaults' fail (docs/reference.md): given both, one would be dropped without a word.
      if (('times' in opts) === ('forMs' in opts)) throw new ConfigError('failCalls: give either times or forMs, not both (nor neither)');
      if ('times' in opts) {
        const times = count('failCalls times', opts.times);
        for (const c of list) failing.set(c, { times });
      } else {
        if (typeof opts.forMs !== 'number' || !(opts.forMs > 0) || !Number.isFinite(opts.forMs)) throw new ConfigError(`failCalls forMs must be a finite number of ms above 0, got ${String(opts.forMs)}`);
        for (const c of list) failing.set(c, { until: scheduler.now() + opts.forMs });
      }
    },
    loseAnswers(calls, opts) {
      knownKeys('loseAnswers option', opts, ['times']);
      const n = count('loseAnswers times', opts.times);
      for (const c of forEach(calls, 'loseAnswers')) losing.set(c, n);
    },
  };
}

/** What migration 0009's trigger compares (a watched job newly marked counts as changed, as `not old.watched` there). */
const watchedState = (j: MemoryJob): string => JSON.stringify([j.status, j.execution, j.progress, j.cancelRequestedAt]);

function checkLatency(latency: LedgerLatency): LedgerLatency {
  const check = (what: string, ms: unknown) => {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw new ConfigError(`${what} must be a finite number of ms, at least 0, got ${String(ms)}`);
  };
  if (typeof latency === 'number') check('latencyMs', latency);
  else if (latency !== null && typeof latency === 'object') {
    for (const [call, ms] of Object.entries(latency)) {
      if (call !== 'listen' && !ROUND_TRIPS.includes(call as LedgerRoundTrip)) throw new ConfigError(`latencyMs: "${call}" is not a ledger call`);
      check(`latencyMs.${call}`, ms);
    }
  } else throw new ConfigError(`latencyMs must be a number of ms or an object of them per call, got ${String(latency)}`);
  return typeof latency === 'number' ? latency : { ...latency };
}
