import type { Logger } from 'pino';
import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { MAX_TIMER_MS } from '../config';
import { errorCode } from '../db/transient';
import { ConfigError } from '../errors';

/** A recurring slot's batch settings (sys.retention, sys.outbox), each its payload's field. */
export interface BatchSettings {
  /** Rows per batch (one call, one transaction) at the start of a pass. */
  batchSize: number;
  /** Each batch's statement_timeout, ms. */
  batchTimeoutMs: number;
  /** A pass stops starting batches after this, ms, so that it ends before the next fire is due. */
  passBudgetMs: number;
}

/** What one pass did. */
export interface PassResult {
  /** Rows the batches took. */
  taken: number;
  batches: number;
  /** Batches that ran past their timeout or were too large (each rolled back, the next one half its size). */
  timeouts: number;
  /** The batch size the pass ended with. */
  batchSize: number;
  /** True when its last batch found fewer rows than it asked for: nothing was left. */
  complete: boolean;
}

/**
 * A batch size carried from one pass to the next (sys.outbox: src/recurring/outbox.ts; sys.retention). The outbox's passes
 * have room for four timeouts (8 s, 2 s each), so halving from the full size each pass, a backlog
 * whose batches fit only well below it (large events, many subscribers) would never be taken
 * (test/recurring/batches.spec.ts). With a carry a pass starts at the size the last one ended
 * with, and a full batch that took at most a quarter of the timeout doubles it, up to `batchSize`.
 */
export interface BatchCarry {
  batchSize?: number;
}

/**
 * One pass of bounded batches (River's maintenance services: one pass that loops batches, each
 * with a timeout): `batch(limit)` until one takes fewer than it asked for, the budget is spent,
 * or `signal` aborts. A batch that times out (SQLSTATE 57014) or is too large for one statement
 * (54000: a jsonb past 256 MiB) took nothing; the pass goes on at half the size, down to 1 row.
 * Any other error rejects (the fire's attempt fails). With `carry`, see BatchCarry.
 */
export async function runBatches(
  batch: (limit: number) => Promise<number>,
  settings: BatchSettings,
  options: { scheduler?: SchedulerLike; signal?: AbortSignal; logger?: Logger; what: string; carry?: BatchCarry },
): Promise<PassResult> {
  const scheduler = options.scheduler ?? asyncScheduler;
  const { carry } = options;
  const endAt = scheduler.now() + settings.passBudgetMs;
  const result: PassResult = { taken: 0, batches: 0, timeouts: 0, batchSize: Math.min(settings.batchSize, carry?.batchSize ?? settings.batchSize), complete: false };
  do {
    if (options.signal?.aborted) break;
    result.batches++;
    const startedAt = scheduler.now();
    let n: number;
    try {
      n = await batch(result.batchSize);
    } catch (err) {
      // A timeout, or a batch too large for one statement (54000: a jsonb past 256 MiB): halved.
      if (errorCode(err) !== '57014' && errorCode(err) !== '54000') throw err;
      result.timeouts++;
      result.batchSize = Math.max(1, Math.floor(result.batchSize / 2));
      if (carry) carry.batchSize = result.batchSize;
      options.logger?.warn({ batchSize: result.batchSize, batchTimeoutMs: settings.batchTimeoutMs }, `${options.what} batch ${errorCode(err) === '57014' ? 'timed out' : 'too large for one statement'}; halving the batch`);
      continue;
    }
    result.taken += n;
    if (n < result.batchSize) result.complete = true;
    else if (carry && result.batchSize < settings.batchSize && scheduler.now() - startedAt <= settings.batchTimeoutMs / 4) {
      result.batchSize = Math.min(settings.batchSize, result.batchSize * 2);
      carry.batchSize = result.batchSize;
    }
  } while (!result.complete && scheduler.now() < endAt);
  return result;
}

/**
 * The longest age or window a system definition's payload takes, ms: 100 years. The SQL subtracts
 * it from now(), and a timestamp before 4713 BC is an error that would fail every pass
 * (test/recurring/system.test.ts); a row kept for ever is an age of null.
 */
export const MAX_AGE_MS = 100 * 365.25 * 86_400_000;

/**
 * Field `name` of a slot's payload `p`: an integer min..max, else `fallback` when absent. Throws
 * ConfigError naming the slot (`what`).
 */
export function payloadInt(what: string, p: Record<string, unknown>, name: string, fallback: number, min: number, max: number): number {
  const v = p[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new ConfigError(`${name} of the ${what} payload must be an integer ${min}..${max}, got ${JSON.stringify(v)}`);
  }
  return v;
}

/** The batch fields of a slot's payload over `defaults` (payloadInt each). */
export function batchSettings(what: string, p: Record<string, unknown>, defaults: BatchSettings): BatchSettings {
  return {
    batchSize: payloadInt(what, p, 'batchSize', defaults.batchSize, 1, 1_000_000),
    batchTimeoutMs: payloadInt(what, p, 'batchTimeoutMs', defaults.batchTimeoutMs, 1, MAX_TIMER_MS),
    passBudgetMs: payloadInt(what, p, 'passBudgetMs', defaults.passBudgetMs, 0, MAX_TIMER_MS),
  };
}
