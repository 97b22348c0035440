import { asyncScheduler, merge, type MonoTypeOperatorFunction, type Observable, retry, type SchedulerLike, take, throwError, timer } from 'rxjs';

/** Configuration of {@link retryBackoff}. */
export interface RetryBackoffConfig {
  /** Delay before the first retry, ms (acta's completion write: 1 000). */
  initialMs: number;
  /** Cap of the doubling delay, ms (acta: 30 000). */
  maxMs: number;
  /** Relative jitter: each delay is scaled by a factor in [1 - jitter, 1 + jitter] (acta: 0.25). */
  jitter?: number;
  /** Retries at most this many times (default: without end). */
  maxRetries?: number;
  /** Errors for which this returns false are not retried (default: all are). */
  shouldRetry?: (err: unknown) => boolean;
  /** Called before each retry with the error, the retry number (1-based) and the delay in ms. */
  onRetry?: (err: unknown, retry: number, delayMs: number) => void;
  /** Uniform [0, 1) source for the jitter (default Math.random). */
  random?: () => number;
  /** Time source of the delays (default asyncScheduler); a TestScheduler runs them in virtual time. */
  scheduler?: SchedulerLike;
  /** An emission ends the delay being waited (if any) at once: the retry is made now (e.g. the service is known to be back). */
  retryNow$?: Observable<unknown>;
  /** The delay before retry `n`, ms, instead of `backoffDelay` (a caller whose schedule has its own bounds). */
  delayMs?: (n: number) => number;
}

/** The delay before retry number `n` (1-based): initialMs·2^(n-1), capped at maxMs, jittered. */
export function backoffDelay(n: number, config: Pick<RetryBackoffConfig, 'initialMs' | 'maxMs' | 'jitter'>, random = Math.random): number {
  const base = Math.min(config.maxMs, config.initialMs * 2 ** Math.min(n - 1, 30));
  const jitter = config.jitter ?? 0;
  return Math.max(0, Math.round(base * (1 + jitter * (2 * random() - 1))));
}

/**
 * Resubscribes to the source after an error, waiting a capped, jittered exponential delay
 * (`backoffDelay`: initialMs·2^(n-1), capped at maxMs, then scaled by a factor in
 * [1 - jitter, 1 + jitter]). The retry count is per subscription: every subscription starts at
 * retry 1. An error for which `shouldRetry` returns false, or the error after `maxRetries`
 * retries, goes downstream at once. Time runs on `scheduler` only.
 *
 * The first test of test/operators/retryBackoff.spec.ts is exactly this diagram
 * (initialMs 1000, maxMs 30000, jitter 0.25 with random() = 0.5, i.e. no spread; maxRetries 3):
 * ```
 * source:         --#                       every subscription errors 2 ms in
 * subscriptions:  ^-!
 *                 1002ms ^-!                retry 1, 1 s after the error at 2
 *                 3004ms ^-!                retry 2, 2 s after the error at 1004
 *                 7006ms ^-!                retry 3, 4 s after the error at 3006
 * result:         7008ms #                  maxRetries spent: the error goes on
 * ```
 * Later delays: 8 s, 16 s, 30 s, 30 s, ... (each ± 25 %). An emission of `retryNow$` during a
 * delay ends it: the retry is made at once, and the count goes on.
 */
export function retryBackoff<T>(config: RetryBackoffConfig): MonoTypeOperatorFunction<T> {
  const scheduler = config.scheduler ?? asyncScheduler;
  const random = config.random ?? Math.random;
  return retry<T>({
    count: config.maxRetries,
    delay: (err, n) => {
      if (config.shouldRetry && !config.shouldRetry(err)) return throwError(() => err);
      const delayMs = config.delayMs ? config.delayMs(n) : backoffDelay(n, config, random);
      config.onRetry?.(err, n, delayMs);
      return config.retryNow$ ? merge(timer(delayMs, scheduler), config.retryNow$).pipe(take(1)) : timer(delayMs, scheduler);
    },
  });
}
