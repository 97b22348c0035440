import pino, { type Level } from 'pino';
import { asyncScheduler, firstValueFrom, type SchedulerAction, type SchedulerLike, type Subscription } from 'rxjs';
import { intOption, knownKeys, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption, PIPELINE } from '../config';
import { type CompletionOutcome, INT4_MAX, type JobId, type StoredError } from '../db/types';
import { checkDefinition, type Definition } from '../definition';
import { ConfigError } from '../errors';
import { type ExecutorDeps, runEntry } from '../worker/executor';
import { type Jsonified, toJsonText } from '../json';
import { progressJson } from '../worker/progress';
import { ABORT_CAUSES, type AbortCause, type Entry, Registry } from '../worker/registry';
import { createStepWith, type Step, type StepStore } from '../worker/steps';
import { Timeouts } from '../worker/timeouts';

export interface RunAttemptOptions {
  /** `ctx.jobId`. Default '1'. */
  jobId?: JobId;
  /** `ctx.attempt`, 1-based: this attempt among the charged ones. Default 1; at most the job's maxAttempts. */
  attempt?: number;
  /** `ctx.execution`, the fence: every claim counts, charged or not, so at least `attempt`. Default `attempt`. */
  execution?: number;
  /** `ctx.definition`. Default the definition's name. */
  definitionName?: string;
  /** The job's own maxAttempts (enqueue's option); without it the definition's, else 25. */
  maxAttempts?: number;
  /**
   * Steps recorded by earlier attempts, name → result (a later attempt after a crash): `ctx.step`
   * returns these without running `fn`. Stored as acta stores them, through JSON (a step that
   * returned `undefined` is recorded as null).
   */
  steps?: Record<string, unknown>;
  /**
   * Aborts the attempt when it aborts; its reason is the cause, one of ABORT_CAUSES (else the run
   * rejects with ConfigError). Aborted before the run starts: the handler never runs.
   */
  signal?: AbortSignal;
  /** Aborts the attempt with `cause` `ms` after the run starts, on `scheduler`. */
  abortAfter?: { ms: number; cause: AbortCause };
  /**
   * The clock of the definition's `timeoutMs` and of `abortAfter`. Default `asyncScheduler` (jest's
   * fake timers drive it). A VirtualTimeScheduler is used as given; a TestScheduler left at rxjs's
   * maxFrames (750) has it raised for the run to the attempt's own timers (framesFor, below).
   */
  scheduler?: SchedulerLike;
}

/** One line the attempt's logger wrote: pino's fields with the level by name. */
export interface LogLine {
  level: Level;
  msg?: string;
  [field: string]: unknown;
}

/** What one attempt came to, as the worker would write it. */
export interface AttemptRun<R = unknown> {
  /**
   * `succeeded`; `failed` (retried after `retryDelayMs`); `failed_final` (no attempts left, or a
   * thrown non-Error, a result that cannot be stored, or a ctx call's refusal: src/worker/refusals.ts); `handed_back` (aborted for 'shutdown' or
   * 'fatal', or aborted before the handler started: not charged); `expired` (aborted for
   * 'deadline' before it started); `cancelled` (aborted for 'cancelled': its job ends Cancelled).
   */
  outcome: CompletionOutcome;
  /**
   * The handler's result as stored (through JSON: a Date as its ISO string, undefined as null);
   * null unless succeeded. Typed as client.result types it, Jsonified<R>: what it is at runtime
   * (test/types/runAttempt.ts).
   */
  result: Jsonified<R> | null;
  /** The error as stored (getJob's `error`); null unless the attempt failed. */
  error: StoredError | null;
  /** ms until the job is due again (the backoff of a failed attempt; 0 when handed back); null once it has ended. */
  retryDelayMs: number | null;
  /** What the attempt was aborted with, if it was. */
  abortCause: AbortCause | null;
  steps: {
    /** Names of the steps whose `fn` ran, in the order they started. */
    ran: string[];
    /** Names of the steps that returned a recorded result without running `fn`. */
    replayed: string[];
    /** Every recorded step after the attempt, name → result as stored: the `steps` option of a later attempt. */
    recorded: Record<string, unknown>;
  };
  /** Every line of `ctx.logger`, and the worker's own lines about this attempt ("attempt failed", …), in order. */
  logs: LogLine[];
  /** Every value the handler reported with `ctx.progress`, in order, as stored (through JSON). A worker stores the latest of them at most every 250 ms. */
  progress: unknown[];
}

const OPTION_KEYS = ['jobId', 'attempt', 'execution', 'definitionName', 'maxAttempts', 'steps', 'signal', 'abortAfter', 'scheduler'];

/**
 * Runs one attempt of `definition` on `payload` in this process, without a database: the
 * handler gets a JobContext whose parts are real and in memory, and the attempt ends as a
 * worker ends it, by the worker's own code (src/worker/executor.ts, runEntry): the definition's
 * `timeoutMs` aborts it with 'timeout' (AttemptTimeoutError), a thrown Error fails it with the
 * definition's backoff until its attempts are used up, a thrown non-Error or a result that cannot
 * be stored fails it for good. `ctx.step` keeps acta's rules (src/worker/steps.ts) over an in-memory
 * record. The payload goes through JSON first, as enqueue stores it.
 *
 * Resolves when the worker would write the attempt's completion: at once when it is aborted,
 * even if the handler goes on (the worker does not wait for a handler that ignores its signal).
 * Rejects with ConfigError for a definition createWorker refuses or a bad option, and with
 * InvalidJsonError for a payload or a seeded step that cannot be stored.
 */
export async function runAttempt<P, R>(definition: Definition<P, R>, payload: NoInfer<P>, options: RunAttemptOptions = {}): Promise<AttemptRun<R>> {
  checkDefinition(definition as Partial<Definition>, true);
  if (options === null || typeof options !== 'object') throw new ConfigError(`runAttempt's options are an object, got ${options === null ? 'null' : typeof options}`);
  knownKeys('runAttempt option', options, OPTION_KEYS);
  const attempt = intOption('attempt', options.attempt ?? 1, 1, INT4_MAX);
  const maxAttempts = options.maxAttempts === undefined ? null : intOption('maxAttempts', options.maxAttempts, 1, INT4_MAX);
  const limit = maxAttempts ?? definition.maxAttempts ?? PIPELINE.maxAttempts;
  if (attempt > limit) throw new ConfigError(`attempt ${attempt} is past the job's maxAttempts (${limit}): a worker never claims it`);
  const name = options.definitionName === undefined ? definition.name : nameOption('definitionName', options.definitionName, MAX_NAME_BYTES);
  const { abortAfter, signal } = options;
  if (abortAfter !== undefined) {
    if (abortAfter === null || typeof abortAfter !== 'object') throw new ConfigError('abortAfter is { ms, cause }');
    intOption('abortAfter.ms', abortAfter.ms, 0, MAX_TIMER_MS);
    abortCause('abortAfter.cause', abortAfter.cause);
  }
  // Not instanceof: an AbortSignal of another realm (a jest or vm context) is one too.
  if (signal !== undefined && (signal === null || typeof signal.addEventListener !== 'function' || typeof signal.aborted !== 'boolean')) throw new ConfigError('signal must be an AbortSignal');
  const scheduler = options.scheduler ?? asyncScheduler;
  if (typeof scheduler.now !== 'function' || typeof scheduler.schedule !== 'function') throw new ConfigError('scheduler must be an RxJS SchedulerLike');

  const frames = framesFor(scheduler);
  const registry = new Registry();
  const [entry] = registry.addClaimed(
    [
      {
        id: options.jobId === undefined ? '1' : nameOption('jobId', options.jobId),
        definition: name,
        payload: JSON.parse(toJsonText(payload)),
        execution: options.execution === undefined ? attempt : intOption('execution', options.execution, attempt, INT4_MAX),
        attempts: attempt - 1,
        maxAttempts,
        unchargedReturns: 0,
        priority: 0,
      },
    ],
    Infinity, // no lease, so no attempt deadline
  );
  const attemptDeps = testDeps(entry, registry, definition as Definition, frames.scheduler, seededSteps(options.steps));

  let refuse!: (err: unknown) => void;
  const refused = new Promise<never>((_, reject) => (refuse = reject));
  const onAbort = () => {
    try {
      registry.abort(entry, abortCause("the signal's reason", signal!.reason));
    } catch (err) {
      refuse(err);
      registry.abort(entry, 'fatal'); // ends the attempt, and its timeout, all the same
    }
  };
  let timer: Subscription | undefined;
  try {
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    if (abortAfter) timer = frames.scheduler.schedule(() => registry.abort(entry, abortAfter.cause), abortAfter.ms);
    const { row } = await Promise.race([firstValueFrom(runEntry(entry, attemptDeps.deps)), refused]);
    // The job's end: no due time (docs/reference.md, "acta/testing": retryDelayMs null once the job has ended; a cancel ends it Cancelled).
    const ended = row.outcome === 'succeeded' || row.outcome === 'failed_final' || row.outcome === 'cancelled' || row.outcome === 'skipped';
    return {
      outcome: row.outcome,
      result: row.result === null ? null : (JSON.parse(row.result) as Jsonified<R>),
      error: row.error === null ? null : (JSON.parse(row.error) as StoredError),
      retryDelayMs: ended ? null : row.retryDelayMs,
      abortCause: entry.abortCause ?? null,
      steps: attemptDeps.steps(),
      logs: attemptDeps.logs.slice(),
      progress: attemptDeps.progress.slice(),
    };
  } finally {
    signal?.removeEventListener('abort', onAbort);
    timer?.unsubscribe();
    frames.restore();
  }
}

/** rxjs's TestScheduler's maxFrames outside its run() (rxjs/src/internal/testing/TestScheduler.ts, defaultMaxFrame). */
const TEST_SCHEDULER_MAX_FRAMES = 750;

/** Per TestScheduler whose maxFrames runAttempt raised: the runs under way on it, and the frame it was raised to. */
const raisedFrames = new WeakMap<object, { runs: number; raised: number }>();

/**
 * The scheduler the attempt runs on. rxjs's TestScheduler, outside its run(), flushes only the
 * actions due by frame 750 (a frame is 1 ms of schedule's delay): a timeoutMs (300 s by default)
 * or an abortAfter past it never fired, and the run never settled. One left at that default has its
 * maxFrames raised to cover each action the attempt schedules (the frame it is due), while runs on
 * it are under way, and 750 put back when the last one ends (unless changed meanwhile: a maxFrames
 * set by the caller is theirs): rxjs's bound stays for everything after (test/testing/
 * runAttempt.spec.ts, "a TestScheduler left at rxjs's default maxFrames"). A VirtualTimeScheduler
 * (docs/reference.md, "acta/testing"), or a TestScheduler given another maxFrames or in its run(),
 * is used as given. Duck-typed: a TestScheduler of another copy of rxjs is one too.
 */
function framesFor(scheduler: SchedulerLike): { scheduler: SchedulerLike; restore(): void } {
  const virtual = scheduler as SchedulerLike & { maxFrames?: unknown; expectObservable?: unknown; run?: unknown };
  let state = raisedFrames.get(virtual);
  const ours = state !== undefined && virtual.maxFrames === state.raised;
  if (!ours && (virtual.maxFrames !== TEST_SCHEDULER_MAX_FRAMES || typeof virtual.expectObservable !== 'function' || typeof virtual.run !== 'function')) {
    return { scheduler, restore: () => undefined };
  }
  const test = virtual as SchedulerLike & { maxFrames: number };
  if (state === undefined || !ours) raisedFrames.set(test, (state = { runs: 0, raised: TEST_SCHEDULER_MAX_FRAMES }));
  const held = state;
  held.runs++;
  let restored = false;
  return {
    scheduler: {
      now: () => test.now(),
      schedule: <T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, value?: T) => {
        const due = test.now() + Math.max(0, delay);
        if (due > test.maxFrames && test.maxFrames === held.raised) test.maxFrames = held.raised = due;
        return test.schedule(work, delay, value);
      },
    },
    restore: () => {
      if (restored) return;
      restored = true;
      if (--held.runs > 0 || raisedFrames.get(test) !== held) return;
      raisedFrames.delete(test);
      if (test.maxFrames === held.raised) test.maxFrames = TEST_SCHEDULER_MAX_FRAMES;
    },
  };
}

/**
 * The executor's dependencies for one test attempt, and what they recorded: every part of the
 * handler's context that is not plain data comes from here (a new part of JobContext that needs
 * one is one more field here).
 */
function testDeps(entry: Entry, registry: Registry, definition: Definition, scheduler: SchedulerLike, seeded: Map<string, unknown>) {
  const logs: LogLine[] = [];
  const logger = pino(
    { level: 'trace', base: undefined, timestamp: false, formatters: { level: (label) => ({ level: label }) } },
    { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) },
  );
  const records = new Map(seeded);
  // As acta.record_step: a name recorded first by a concurrent call is 'exists' with that result.
  const store: StepStore = {
    load: async () => new Map(records),
    record: async (name, resultJson) => {
      if (records.has(name)) return { status: 'exists', result: records.get(name) };
      const result: unknown = JSON.parse(resultJson);
      records.set(name, result);
      return { status: 'recorded', result };
    },
  };
  const ran: string[] = [];
  const replayed: string[] = [];
  const progress: unknown[] = [];
  const stepFor = (e: Entry): Step => {
    const step = createStepWith(store, e, registry, scheduler);
    return async <T>(name: string, fn: () => Promise<T> | T): Promise<T> => {
      let didRun = false;
      const value = await step(name, () => {
        didRun = true;
        ran.push(name);
        return fn();
      });
      if (!didRun) replayed.push(name);
      return value;
    };
  };
  const deps: ExecutorDeps = {
    definitions: new Map([[entry.row.definition, definition]]),
    registry,
    logger: logger.child({ component: 'executor' }),
    scheduler,
    timeouts: new Timeouts(scheduler),
    stepFor,
    progress: (_entry, value) => void progress.push(JSON.parse(progressJson(value))),
  };
  return { deps, logs, progress, steps: () => ({ ran: ran.slice(), replayed: replayed.slice(), recorded: Object.fromEntries(records) }) };
}

/** The `steps` option as acta would have stored them: through JSON, undefined as null. */
function seededSteps(steps: Record<string, unknown> | undefined): Map<string, unknown> {
  if (steps === undefined) return new Map();
  if (steps === null || typeof steps !== 'object' || Array.isArray(steps)) throw new ConfigError('steps is an object, step name → recorded result');
  const names = Object.keys(steps);
  if (names.includes('')) throw new ConfigError('a step needs a non-empty name');
  const stored = JSON.parse(toJsonText(Object.fromEntries(names.map((n) => [n, steps[n] === undefined ? null : steps[n]])))) as Record<string, unknown>;
  return new Map(names.map((n) => [n, stored[n]]));
}

function abortCause(what: string, value: unknown): AbortCause {
  if (!(ABORT_CAUSES as readonly unknown[]).includes(value)) {
    throw new ConfigError(`${what} must be one of ${ABORT_CAUSES.join(', ')} (the causes a worker aborts an attempt with), got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`);
  }
  return value as AbortCause;
}
