import type { Logger } from 'pino';
import { intOption, knownKeys, MAX_NAME_BYTES, MAX_TIMER_MS, nameOption } from './config';
import { INT4_MAX, type JobId } from './db/types';
import { ConfigError } from './errors';
import type { Step } from './steps';

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
  /** Aborted when the attempt times out, loses its lease, or the worker stops (reason: the cause). */
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
   * recorded result without running `fn` (see src/steps.ts for exactly what is guaranteed).
   */
  step: Step;
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
}

const DEFINITION_KEYS = ['name', 'handler', 'timeoutMs', 'maxAttempts', 'backoff'];

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
  }
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
