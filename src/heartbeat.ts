import { defer, exhaustMap, interval, merge, type Observable, type SchedulerLike, tap } from 'rxjs';
import type { Logger } from 'pino';
import { retryBackoff } from '../operators';
import type { LeaseClock } from './config';
import type { HeartbeatResult, HeldPair } from './db/functions';
import { isTransientDbError } from './db/transient';
import type { Registry } from './registry';

export interface HeartbeatConfig {
  registry: Registry;
  clock: LeaseClock;
  /** One heartbeat call (acta.heartbeat) for the held pairs. */
  beat: (held: HeldPair[]) => Promise<HeartbeatResult>;
  /** Starts the recovery pass beside the loop (this beat took it). */
  startRecovery: () => void;
  /** false while heartbeats fail: the worker claims nothing then (seed 001, "Database errors"). */
  onHealth: (healthy: boolean) => void;
  /** No heartbeat succeeded for a whole lease, or a non-transient error: the worker must stop. */
  onFatal: (err: unknown) => void;
  logger: Logger;
  scheduler: SchedulerLike;
  /** Scheduler time of the last confirmed renewal's start (the worker's registration). */
  startedAt: number;
  random?: () => number;
}

/**
 * The heartbeat (shared/DESIGN.md, "Heartbeat"; lease clock): every H it snapshots the registry
 * and makes ONE call with the held (job, execution) pairs, Claimed ones included. A renewed row
 * re-arms its entry's deadline (2.5 H after this beat's start); a row locked by another
 * transaction keeps its deadline; a row not answered (lost) aborts a Claimed or Executing entry,
 * while a Finalizing one is left to its write. The beat that took the namespace's recovery pass
 * starts it beside the loop. A failing call is repeated with capped, jittered back-off while the
 * worker stops claiming; after a whole lease without success (or on a non-transient error) the
 * worker is told to stop. Every H/4 the deadlines are checked: a passed one aborts its attempt.
 * The returned Observable never errors.
 */
export function heartbeat(config: HeartbeatConfig): Observable<unknown> {
  const { registry, clock, scheduler, logger } = config;
  let lastSuccessAt = config.startedAt;
  let healthy = true;
  const setHealthy = (value: boolean) => {
    if (value !== healthy) {
      healthy = value;
      config.onHealth(value);
    }
  };

  const beatOnce = () => {
    const startedAt = scheduler.now();
    const entries = registry.snapshot();
    return defer(() => config.beat(registry.heldPairs(entries))).pipe(
      retryBackoff<HeartbeatResult>({
        initialMs: Math.min(1_000, clock.heartbeatIntervalMs / 4),
        maxMs: clock.heartbeatIntervalMs,
        jitter: 0.25,
        random: config.random,
        scheduler,
        shouldRetry: (err) => {
          setHealthy(false);
          if (!isTransientDbError(err)) {
            config.onFatal(err);
            return false;
          }
          if (scheduler.now() - lastSuccessAt >= clock.leaseMs) {
            logger.error({ err }, 'no heartbeat succeeded for a whole lease: stopping');
            config.onFatal(err);
            return false;
          }
          return true;
        },
        onRetry: (err, retry, delayMs) => logger.warn({ err, retry, delayMs }, 'heartbeat failed; repeating'),
      }),
      tap((result) => {
        lastSuccessAt = startedAt;
        setHealthy(true);
        for (const pair of result.renewed) {
          const entry = registry.get(pair.id);
          if (entry && entry.row.execution === pair.execution) entry.deadlineAt = startedAt + clock.attemptDeadlineMs;
        }
        for (const pair of result.lost) {
          const entry = registry.get(pair.id);
          if (entry && entry.row.execution === pair.execution && entry.state !== 'finalizing') {
            logger.warn({ jobId: pair.id, execution: pair.execution }, 'lease lost: cancelling the attempt');
            registry.abort(entry, 'lost');
          }
        }
        if (result.recoveryDue) config.startRecovery();
      }),
    );
  };

  const beats$ = interval(clock.heartbeatIntervalMs, scheduler).pipe(
    exhaustMap(() => beatOnce()),
  );
  const deadlines$ = interval(Math.max(10, clock.heartbeatIntervalMs / 4), scheduler).pipe(
    tap(() => {
      const now = scheduler.now();
      for (const entry of registry.snapshot()) {
        if (entry.state !== 'finalizing' && now >= entry.deadlineAt) {
          logger.warn({ jobId: entry.row.id, execution: entry.row.execution }, 'attempt deadline passed: aborting');
          registry.abort(entry, 'deadline');
        }
      }
    }),
  );
  return merge(beats$, deadlines$);
}
