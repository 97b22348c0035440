import type { Logger } from 'pino';
import { intOption, knownKeys, MAX_KEY_BYTES, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption } from './config';

export { MAX_KEY_BYTES };
import { type DeclaredPolicy, type DeclaredSchedule, INT4_MAX, type JobId } from './db/types';
import { ConfigError } from './errors';
import type { Step } from './worker/steps';
import { checkSchedules, type ScheduleSpec } from './recurring/schedules';
import type { WorkflowContext } from './workflows/workflow';

/**
 * Back-off before a failed job's next attempt. An object gives `delayMs · factor^(attempt-1)`
 * capped at `maxDelayMs` (defaults: factor 2, cap 1 h); a function gets the attempt number that
 * failed (1-based) and returns ms.
 */
export type Backoff = { delayMs: number; factor?: number; maxDelayMs?: number } | ((attempt: number) => number);

/** Default back-off: 1 s, doubling, capped at 1 h. */
export const DEFAULT_BACKOFF: Backoff = { delayMs: 1_000, factor: 2, maxDelayMs: 3_600_000 };

/** ms to wait after attempt number `attempt` (1-based) failed: 0..2^31−1 (the retry delay is an integer column). */
export function backoffMs(backoff: Backoff | undefined, attempt: number): number {
  const b = backoff ?? DEFAULT_BACKOFF;
  const ms = typeof b === 'function' ? b(attempt) : Math.min(b.maxDelayMs ?? 3_600_000, b.delayMs * (b.factor ?? 2) ** (attempt - 1));
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, INT4_MAX) : 0;
}

/** What a handler receives besides its payload. */
export interface JobContext {
  /** Aborted when the attempt times out, loses its lease, its job is cancelled (client.cancel), or the worker stops (reason: the cause: 'timeout', 'deadline', 'lost', 'cancelled', 'shutdown', 'fatal'). */
  signal: AbortSignal;
  jobId: JobId;
  /** 1-based number of this attempt among the charged ones (attempts so far + 1). */
  attempt: number;
  /** The fence: this attempt's execution number (counts every claim, charged or not). */
  execution: number;
  /** The definition's name. */
  definition: string;
  /** pino child logger with `{ jobId, definition, attempt }`. */
  logger: Logger;
  /**
   * A durable step: runs `fn` once and records its result; later attempts of this job get the
   * recorded result without running `fn` (see src/worker/steps.ts for exactly what is guaranteed).
   */
  step: Step;
  /**
   * Ends the attempt as rate limited (e.g. the API answered 429): the job is due again after
   * `retryAfterMs` (default 1,000; an integer 0..2^31−1, else ConfigError), uncharged, and its rate
   * meter (the definition's `rate` key) is held shut for the whole fleet until then. Throws
   * RateLimitedError, which the handler should let through; once called, the attempt is rate
   * limited whatever the handler does next (docs/DESIGN.md, "Policies").
   */
  rateLimited(options?: { retryAfterMs?: number }): never;
  /**
   * Reports the attempt's progress (any JSON value of at most 64 KiB, e.g. `{ done: 40, of: 100 }`):
   * stored on the job (getJob's `progress`) and seen by client.observe, the latest value per
   * attempt at most every 250 ms. Throws InvalidJsonError for a value that cannot be stored.
   */
  progress(value: unknown): void;
  /** A schedule's fire: its scheduled instant (the same on every attempt), so a handler can be idempotent per fire (docs/schedules.md); absent for other jobs. */
  scheduledAt?: Date;
  /** Workflows (docs/workflows.md): signals and child jobs (src/workflows/workflow.ts). */
  waitForSignal: WorkflowContext['waitForSignal'];
  spawn: WorkflowContext['spawn'];
  spawnMany: WorkflowContext['spawnMany'];
  waitForChildren: WorkflowContext['waitForChildren'];
}

/**
 * At most `limit` attempts of one key hold a slot at any instant, across every worker of the
 * namespace (docs/DESIGN.md, "Policies"). A job's key comes from `key(payload)` at enqueue, or is
 * given as the enqueue option `concurrencyKey`. A job refused its slot waits parked, uncharged, in
 * its place, and is released when a slot frees (at the latest reconsidered after 2 s).
 */
export interface ConcurrencyPolicy<P = any> {
  /** The job's key, from its payload: a non-empty string of at most 1,000 bytes. Without it, every job of the definition has one key, the definition's name (unless enqueued with `concurrencyKey`). */
  key?: (payload: P) => string;
  /** Attempts of one key at once, fleet-wide: an integer ≥ 1. May be left out with `fair: true` (turns by key, no limit). */
  limit?: number;
}

/**
 * At most `limit` attempts of one key start within any `perMs` window, across every worker of the
 * namespace (a sliding window). A job refused a token waits parked, uncharged, until the next one.
 */
export interface RatePolicy<P = any> {
  /** The job's meter, from its payload (or the enqueue option `rateKey`). Without it, one meter for the whole definition, named after it. */
  key?: (payload: P) => string;
  /** Starts per window: an integer ≥ 1. */
  limit: number;
  /** The window, ms: an integer 1..2^31−1. */
  perMs: number;
}

/**
 * A job definition: a handler and its policy. The handler's resolved value is stored as the job's
 * result (`undefined` as null); it must be storable as jsonb, else the job ends Failed without
 * retry. A thrown Error (or a timeout) fails the attempt; the job is retried after `backoff` until
 * its attempts are used up. A thrown non-Error (a string, a plain object) carries no name, message
 * or stack to store: the job ends Failed at once, without retry (error name NonErrorThrown).
 */
export interface Definition<P = any, R = unknown> {
  name: string;
  handler: (payload: P, ctx: JobContext) => Promise<R> | R;
  /**
   * Per-attempt execution timeout in ms, an integer 1..2^31−1 (default 300,000 = 5 min,
   * PIPELINE.executionTimeoutMs; createWorker throws ConfigError outside that range); a timeout
   * is retried like a failure.
   */
  timeoutMs?: number;
  /**
   * Attempts before Failed, for its jobs that were enqueued without a maxAttempts of their own
   * (default 25; a job's own value wins). Declared in acta.definitions at each worker start, so
   * recovery applies it too (the newest live worker's declaration; migration 0004).
   */
  maxAttempts?: number;
  backoff?: Backoff;
  /** A concurrency limit per key, fleet-wide (see ConcurrencyPolicy). */
  concurrency?: ConcurrencyPolicy<P>;
  /** A rate limit per key, fleet-wide (see RatePolicy). */
  rate?: RatePolicy<P>;
  /**
   * The job's lane, from its payload (or the enqueue option `lane`): jobs of one lane run one at a
   * time, in the order their enqueues committed (docs/policies.md, "Lanes"); a retrying head keeps
   * the lane waiting, a head that fails for good or is cancelled hands it on.
   */
  lane?: (payload: P) => string;
  /**
   * Fair order across the concurrency key: each key takes turns, so one key's burst does not hold
   * another key's lone job back more than about one claim, and a key alone still takes every free
   * executor. Needs `concurrency`.
   */
  fair?: boolean;
  /**
   * Cron schedules whose fires are jobs of this definition (docs/schedules.md): one or several,
   * each with a stable name (default: the definition's). Reconciled per namespace at every worker
   * start: the newest live build's declaration applies.
   */
  schedule?: ScheduleSpec | ScheduleSpec[];
  /**
   * Topics whose events (client.publish) become jobs of this definition, one per event, payload
   * `OutboxEvent` (docs/outbox.md). A job's lane is its event's key: `lane`, `concurrency.key`
   * and `rate.key` functions are refused with it. Stored with the definition's policy.
   */
  subscribe?: string | string[];
}

/**
 * The result type definition `D` resolves: its handler's when `D` is a Definition, unknown when it
 * is a name or anything else (or a Definition<any, any>: its ids are plain, as a name's). What an
 * enqueued or spawned job's id carries (JobId<R>, src/db/types.ts).
 */
export type ResultOf<D> = D extends Definition<any, infer R> ? NotAny<R> : unknown;

/** `R`, except unknown for `any` (JobId<any> would carry any, unchecked, to result). */
export type NotAny<R> = 0 extends 1 & R ? unknown : R;

/** The payload type definition `D` takes: its handler's when `D` is a Definition, any value when it is a name. */
export type PayloadOf<D> = D extends Definition<infer P, any> ? P : unknown;

/**
 * A batch element (`Item`: client.enqueueMany's EnqueueItem, ctx.spawnMany's SpawnItem) whose
 * `definition` is `D`: its payload is checked against `PayloadOf<D>`. In a literal array each
 * element against its own definition; an array built by `map` against the union of its elements'
 * definitions. Items typed as the plain `Item[]` are not checked (code generic over the definition:
 * `PayloadOf` of a type parameter is not known, so such items must be typed so).
 */
export type ItemOf<Item, D> = Omit<Item, 'definition' | 'payload'> & { definition: D; payload: PayloadOf<D> };

const DEFINITION_KEYS = ['name', 'handler', 'timeoutMs', 'maxAttempts', 'backoff', 'concurrency', 'rate', 'lane', 'fair', 'schedule', 'subscribe'];


/**
 * Checks a definition before anything touches the database; throws ConfigError. createWorker
 * checks every field and needs a handler; createClient (`needsHandler` false) uses only the name
 * and maxAttempts but refuses the same mistakes. maxAttempts is a PostgreSQL integer of at least 1
 * (acta.jobs' check): out of that range the enqueue would fail in the database instead.
 */
export function checkDefinition(d: Partial<Definition>, needsHandler: boolean): void {
  if (d === null || typeof d !== 'object') throw new ConfigError(`a definition is an object such as defineJob({ name, handler }), got ${d === null ? 'null' : typeof d}`);
  const name = nameOption('a definition name', d.name, MAX_NAME_BYTES);
  knownKeys(`field of definition "${name}"`, d, DEFINITION_KEYS);
  if (needsHandler && typeof d.handler !== 'function') throw new ConfigError(`definition "${name}" needs a handler function`);
  if (d.timeoutMs !== undefined) intOption(`timeoutMs of definition "${name}"`, d.timeoutMs, 1, MAX_TIMER_MS);
  if (d.maxAttempts !== undefined) intOption(`maxAttempts of definition "${name}"`, d.maxAttempts, 1, INT4_MAX);
  const b = d.backoff;
  if (b !== undefined && typeof b !== 'function') {
    const finite = (v: unknown, min: number) => typeof v === 'number' && Number.isFinite(v) && v >= min;
    if (b === null || typeof b !== 'object' || !finite(b.delayMs, 0) || (b.factor !== undefined && !finite(b.factor, 1)) || (b.maxDelayMs !== undefined && !finite(b.maxDelayMs, 0))) {
      throw new ConfigError(`backoff of definition "${name}" must be a function or { delayMs >= 0, factor >= 1?, maxDelayMs >= 0? } (ms), got ${JSON.stringify(b)}`);
    }
    // A misspelt cap (`maxDelay`) was ignored: the backoff grew to the default 1 h.
    knownKeys(`field of backoff of definition "${name}"`, b, ['delayMs', 'factor', 'maxDelayMs']);
  }
  const policy = (what: string, value: unknown, keys: string[]) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new ConfigError(`${what} of definition "${name}" must be an object { ${keys.join(', ')} }, got ${JSON.stringify(value) ?? typeof value}`);
    knownKeys(`field of ${what} of definition "${name}"`, value, keys);
    const key = (value as { key?: unknown }).key;
    if (key !== undefined && typeof key !== 'function') throw new ConfigError(`${what}.key of definition "${name}" must be a function (payload) => string`);
  };
  if (d.concurrency !== undefined) {
    policy('concurrency', d.concurrency, ['key', 'limit']);
    if (d.concurrency.limit !== undefined) intOption(`concurrency.limit of definition "${name}"`, d.concurrency.limit, 1, INT4_MAX);
    else if (d.fair !== true) throw new ConfigError(`concurrency of definition "${name}" needs a limit (or fair: true, for turns by key without a limit)`);
  }
  if (d.rate !== undefined) {
    policy('rate', d.rate, ['key', 'limit', 'perMs']);
    intOption(`rate.limit of definition "${name}"`, d.rate.limit, 1, INT4_MAX);
    intOption(`rate.perMs of definition "${name}"`, d.rate.perMs, 1, MAX_TIMER_MS);
  }
  if (d.lane !== undefined && typeof d.lane !== 'function') throw new ConfigError(`lane of definition "${name}" must be a function (payload) => string`);
  if (d.fair !== undefined && typeof d.fair !== 'boolean') throw new ConfigError(`fair of definition "${name}" must be a boolean`);
  if (d.fair === true && d.concurrency === undefined) throw new ConfigError(`fair of definition "${name}" needs concurrency: { key }: turns are taken by concurrency key`);
  if (d.schedule !== undefined) schedulesOf(d as Definition);
  if (d.subscribe !== undefined) checkSubscribe(d as Partial<Definition> & { name: string });
}

/**
 * The topics of `subscribe`, checked: a topic or a non-empty array of them (each as client.publish
 * takes it), on a definition whose policy keys the fan-out can compute in SQL (its name, the
 * event's key): a key function would never run there. Throws ConfigError.
 */
function checkSubscribe(d: Partial<Definition> & { name: string }): string[] {
  const topics = typeof d.subscribe === 'string' ? [d.subscribe] : d.subscribe;
  if (!Array.isArray(topics) || topics.length === 0) throw new ConfigError(`subscribe of definition "${d.name}" must be a topic or a non-empty array of topics, got ${JSON.stringify(d.subscribe)}`);
  for (const t of topics) nameOption(`a topic in subscribe of definition "${d.name}"`, t, MAX_NAME_BYTES);
  const fn = d.lane !== undefined ? 'lane' : d.concurrency?.key !== undefined ? 'concurrency.key' : d.rate?.key !== undefined ? 'rate.key' : undefined;
  if (fn) throw new ConfigError(`definition "${d.name}" subscribes to topics and has a ${fn} function: its jobs are made from events in the database, where the lane is the event's key and the concurrency and rate keys the definition's name (docs/outbox.md)`);
  return [...new Set(topics)];
}

/** A definition's policy as its workers declare it at registration (acta.workers.policies): its functions only named. */
export function declaredPolicy(d: Definition): DeclaredPolicy {
  const b = d.backoff;
  return {
    maxAttempts: d.maxAttempts ?? null,
    timeoutMs: d.timeoutMs ?? null,
    backoff: b === undefined ? null : typeof b === 'function' ? 'function' : { delayMs: b.delayMs, factor: b.factor, maxDelayMs: b.maxDelayMs },
    concurrency: d.concurrency ? { limit: d.concurrency.limit ?? null } : null,
    rate: d.rate ? { limit: d.rate.limit, perMs: d.rate.perMs } : null,
    lane: d.lane !== undefined,
    fair: d.fair === true,
    ...(d.schedule === undefined ? {} : { schedules: schedulesOf(d) }),
    ...(d.subscribe === undefined ? {} : { subscribe: checkSubscribe(d) }),
  };
}

/**
 * A definition's schedules, checked, each with its fires' policy keys (migration 0021): the spec's
 * own, else the definition's key functions on the schedule's payload, as an enqueue computes them
 * (policyKeys), so its fires are admitted like enqueued jobs. Throws ConfigError.
 */
export function schedulesOf(d: Pick<Definition, 'name' | 'concurrency' | 'rate' | 'lane' | 'schedule'>): DeclaredSchedule[] {
  return checkSchedules(d.name, d.schedule).map((s) => ({ ...s, ...policyKeys(d, s.payload, s) }));
}

/**
 * A job's policy keys: the enqueue options given, else the definition's key functions' answers;
 * a concurrency or rate policy without a key function keys every job of the definition by its name
 * (one limit for the whole definition).
 */
export interface PolicyKeys {
  concurrencyKey: string | null;
  rateKey: string | null;
  lane: string | null;
}

/**
 * The keys of one job at enqueue: each given option wins, else the definition's function computes
 * it from the payload (when the definition is known). Throws ConfigError for a key that is not a
 * non-empty string of at most MAX_KEY_BYTES without \u0000, or a key function that throws.
 */
export function policyKeys(d: Pick<Definition, 'name' | 'concurrency' | 'rate' | 'lane'> | undefined, payload: unknown, given: { concurrencyKey?: unknown; rateKey?: unknown; lane?: unknown }): PolicyKeys {
  const one = (what: string, option: unknown, fn: ((p: any) => string) | undefined, whole: string | null): string | null => {
    if (option !== undefined && option !== null) return nameOption(what, option, MAX_KEY_BYTES);
    if (!fn) return whole;
    let key: unknown;
    try {
      key = fn(payload);
    } catch (err) {
      throw new ConfigError(`the ${what} function of definition "${d?.name}" threw: ${err instanceof Error ? err.message : String(err)}`);
    }
    return nameOption(`${what} of definition "${d?.name}"`, key, MAX_KEY_BYTES);
  };
  return {
    concurrencyKey: one('concurrencyKey', given.concurrencyKey, d?.concurrency?.key, d?.concurrency ? d.name : null),
    rateKey: one('rateKey', given.rateKey, d?.rate?.key, d?.rate ? d.name : null),
    lane: one('lane', given.lane, d?.lane, null),
  };
}

/**
 * Defines a job with its payload type, for type inference at the call site. Checks it as
 * createWorker does (checkDefinition: name, handler, timeoutMs, maxAttempts, backoff) and throws
 * ConfigError where it is written, not only later where a worker is created
 * (test/db/enqueue.test.ts, "createWorker and createClient refuse unknown options").
 */
export function defineJob<P = unknown, R = unknown>(definition: Definition<P, R>): Definition<P, R> {
  checkDefinition(definition as Partial<Definition>, true);
  return definition;
}
