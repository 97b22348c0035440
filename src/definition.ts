import type { Logger } from 'pino';
import { INT4_MAX, type JobId } from './db/functions';
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
 * retry. A thrown value fails the attempt; the job is retried after `backoff` until its attempts
 * are used up.
 */
export interface Definition<P = any, R = unknown> {
  name: string;
  handler: (payload: P, ctx: JobContext) => Promise<R> | R;
  /**
   * Per-attempt execution timeout in ms, an integer 1..2^31−1 (default 300,000 = 5 min, seed 000;
   * createWorker throws ConfigError outside that range); a timeout is retried like a failure.
   */
  timeoutMs?: number;
  /** Attempts before Failed; used as the enqueue default by clients given this definition (else 25). */
  maxAttempts?: number;
  backoff?: Backoff;
}

/** Defines a job with its payload type, for type inference at the call site. */
export function defineJob<P = unknown, R = unknown>(definition: Definition<P, R>): Definition<P, R> {
  return definition;
}
