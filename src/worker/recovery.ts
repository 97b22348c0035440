import { asyncScheduler, catchError, defer, type Observable, of, type SchedulerLike } from 'rxjs';
import type { Logger } from 'pino';
import { retryBackoff } from '../../operators';
import { PIPELINE } from '../config';
import type { RecoveredRow } from '../db/types';
import { isTransientDbError } from '../db/transient';

/** Rows per recover_jobs call; the pass repeats until a call returns fewer. */
export const RECOVERY_BATCH = 10_000;

export interface RecoveryPassConfig {
  /** One acta.recover_jobs call for up to `limit` rows (its own transaction). */
  recover: (limit: number) => Promise<RecoveredRow[]>;
  logger: Logger;
  /** After each call that moved rows (metrics, a wakeup for the claimer). */
  onRecovered?: (rows: RecoveredRow[]) => void;
  /** Back-off of a call that failed transiently: first delay and cap, ms (the worker passes H/4 and H). */
  retryInitialMs?: number;
  retryMaxMs?: number;
  /** Transient failures repeated at most this many times in one pass (default 5); the next pass is one lease later. */
  maxRetries?: number;
  scheduler?: SchedulerLike;
  random?: () => number;
}

/**
 * One recovery pass (docs/DESIGN.md, "The lease clock"; test/faults/recovery.test.ts): calls
 * acta.recover_jobs until a call returns fewer than a full batch. It runs beside the worker's loop, taken by
 * whichever heartbeat found it due (that beat moved the namespace's clock one lease on), so a
 * worker whose executors are all busy still sweeps. A worker that dies mid-pass holds nothing
 * back: each call is its own transaction over rows taken FOR UPDATE SKIP LOCKED. A call that
 * fails transiently is repeated with capped, jittered back-off (rows already returned stay
 * returned); any other error ends the pass. Emits the total rows returned, then completes;
 * never errors.
 */
export function recoveryPass(config: RecoveryPassConfig): Observable<number> {
  const { logger } = config;
  let total = 0;
  return defer(async () => {
    for (;;) {
      const rows = await config.recover(RECOVERY_BATCH);
      total += rows.length;
      if (rows.length > 0) {
        config.onRecovered?.(rows);
        // Named (the first 20, `recovered` counts them all), so an operator can follow each job (docs/operating.md, "Logs").
        logger.warn(
          { recovered: rows.length, charged: rows.filter((r) => r.charged).length, failed: rows.filter((r) => r.status === 'failed').length, jobIds: rows.slice(0, 20).map((r) => r.id) },
          'recovered jobs whose lease expired',
        );
      }
      if (rows.length < RECOVERY_BATCH) return total;
    }
  }).pipe(
    retryBackoff<number>({
      initialMs: config.retryInitialMs ?? PIPELINE.callRetryInitialMs,
      maxMs: config.retryMaxMs ?? PIPELINE.callRetryMaxMs,
      jitter: PIPELINE.callRetryJitter,
      maxRetries: config.maxRetries ?? 5,
      shouldRetry: isTransientDbError,
      onRetry: (err, retry, delayMs) => logger.warn({ err, retry, delayMs }, 'recovery call failed (transient); repeating'),
      scheduler: config.scheduler ?? asyncScheduler,
      random: config.random,
    }),
    catchError((err: unknown) => {
      logger.error({ err }, 'recovery pass failed; the next pass (one lease on) sweeps again');
      return of(total);
    }),
  );
}
