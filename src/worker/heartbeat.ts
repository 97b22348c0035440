import { catchError, defer, EMPTY, exhaustMap, filter, interval, merge, type Observable, type SchedulerLike, takeWhile, tap, timer } from 'rxjs';
import type { Logger } from 'pino';
import { backoffDelay, retryBackoff } from '../../operators';
import { type LeaseClock, PIPELINE } from '../config';
import type { HeartbeatResult, HeldPair } from '../db/types';
import { isSchemaError, isTransientDbError } from '../db/transient';
import { SchemaNotMigratedError } from '../errors';
import { errorText } from '../json';
import { retryErrorFields } from '../logger';
import type { Entry, Registry } from './registry';

export interface HeartbeatConfig {
  registry: Registry;
  clock: LeaseClock;
  /** One heartbeat call (acta.heartbeat) for the held pairs. */
  beat: (held: HeldPair[]) => Promise<HeartbeatResult>;
  /** Starts a periodic pass beside the loop (this beat took it: acta.take_passes). */
  startPass: (name: string) => void;
  /** The namespace's policy version each successful beat reports (the worker reloads when it moved). */
  onPolicyVersion?: (version: number | undefined) => void;
  /** false while heartbeats fail: the worker claims nothing then (test/faults/heartbeat.spec.ts). */
  onHealth: (healthy: boolean) => void;
  /** No heartbeat succeeded for a whole lease while attempts were held, or a non-transient error: the worker must stop. */
  onFatal: (err: unknown) => void;
  /** A beat found a cancel requested for this attempt's job (acta.cancel_job): its lease was renewed; the worker aborts it. */
  onCancel?: (pair: HeldPair) => void;
  /** A beat found this attempt's lease lost; called after it was aborted. */
  onLost?: (entry: Entry) => void;
  logger: Logger;
  scheduler: SchedulerLike;
  /** Scheduler time of the last confirmed renewal's start (the start of the worker's registration). */
  startedAt: number;
  /**
   * Signs that the database is reachable again (the listener reconnected, another call of this
   * worker succeeded): a failed beat waiting for its retry tries at once.
   */
  reachable$?: Observable<unknown>;
  /**
   * The listening connection came up (its first connect, or again): a cancel sent while it was not
   * listening is found by a beat at once when attempts are held, not H later.
   */
  listening$?: Observable<unknown>;
  random?: () => number;
}

/** How long before the earliest attempt deadline a failing heartbeat makes its last try: H/8, within 50 ms..2 s. */
export function lastTryMarginMs(heartbeatIntervalMs: number): number {
  return Math.min(2_000, Math.max(50, heartbeatIntervalMs / 8));
}

/**
 * The delay before retry `n` (1-based) of a failing beat at scheduler time `now`, with
 * `deadlineAt` the earliest deadline of the attempts still running (undefined: none). The back-off
 * doubles from min(1 s, H/4) to min(H, PIPELINE.unreachableRetryMaxMs), ±25 %; it never reaches
 * past the last try before the deadline (deadline − lastTryMarginMs), and from there a try follows
 * every quarter margin until the deadline has passed. So a server back before the deadline (by a
 * quarter margin: 32 ms at H = 1 s, 500 ms at 45 s) is found before it: an outage shorter than
 * (deadline − time since the last renewal) aborts no handler (test/faults/heartbeat.spec.ts,
 * test/faults/outage.test.ts).
 */
export function beatRetryDelayMs(n: number, now: number, deadlineAt: number | undefined, heartbeatIntervalMs: number, random: () => number = Math.random): number {
  const H = heartbeatIntervalMs;
  const backoff = backoffDelay(n, { initialMs: Math.min(1_000, H / 4), maxMs: Math.min(H, PIPELINE.unreachableRetryMaxMs), jitter: 0.25 }, random);
  if (deadlineAt === undefined || now >= deadlineAt) return backoff;
  const margin = lastTryMarginMs(H);
  const lastTryAt = deadlineAt - margin;
  if (now < lastTryAt) return Math.min(backoff, Math.ceil(lastTryAt - now));
  return Math.min(backoff, Math.ceil(margin / 4));
}

/** The earliest deadline of the attempts a beat can still save (held, not aborted, not Finalizing). */
function earliestDeadline(registry: Registry): number | undefined {
  let earliest: number | undefined;
  for (const entry of registry.snapshot()) {
    if (entry.state === 'finalizing' || entry.aborted) continue;
    if (earliest === undefined || entry.deadlineAt < earliest) earliest = entry.deadlineAt;
  }
  return earliest;
}

/** The most job ids a line about many attempts lists (as the shutdown timeout's line). */
const JOB_IDS_LOGGED = 100;

/**
 * The fields of the one line said for the attempts a check or a beat aborted together: their count
 * and job ids (the first JOB_IDS_LOGGED). Not a line per attempt: in an outage every held attempt
 * shares the last renewal's deadline, and 64 executors made 64 lines (test/faults/outageLog.test.ts).
 * Their executors' "attempt failed" lines go at debug (src/worker/executor.ts).
 */
function attemptsFields(entries: Entry[]): { attempts: number; jobIds: string[] } {
  return { attempts: entries.length, jobIds: entries.slice(0, JOB_IDS_LOGGED).map((e) => e.row.id) };
}

/** Raised (through onFatal) when no heartbeat succeeded for a whole lease. */
export class HeartbeatLostError extends Error {
  override readonly name = 'HeartbeatLostError';
  constructor(
    readonly sinceMs: number,
    options?: { cause?: unknown },
  ) {
    super(`no heartbeat succeeded for ${Math.round(sinceMs)} ms (a whole lease): this worker's leases are gone; stopping`, options);
  }
}

/**
 * The heartbeat (docs/DESIGN.md, "The pipeline inside one worker" and "The lease clock";
 * test/faults/heartbeat.spec.ts, test/faults/outage.test.ts).
 *
 * ```
 * beats:   R--------B--------B-x-x--x---x---x--!   every H ONE call (R: the worker's registration,
 *                                                   its first beat); a failing call repeats
 *                                                   (beatRetryDelayMs: min(1 s, H/4) → min(H, 4 s),
 *                                                   ±25 %, never past the last try before the
 *                                                   earliest deadline; at once on a sign that the
 *                                                   database is back); meanwhile no claims
 * renewed: deadline := start of the confirming try + 2.5 H
 * locked:  deadline kept (another transaction holds the row: e.g. our own completion write)
 * lost:    Claimed / Executing entry aborted (cause 'lost'); a Finalizing one is left to its write
 * checks:  every H/4: a passed deadline aborts its attempt (cause 'deadline');
 *          ! = no beat confirmed for a whole lease (4 H) while beats were failing or hanging,
 *          and the worker holds attempts: onFatal(HeartbeatLostError). A worker that holds
 *          nothing has nothing to give back: it keeps trying, without end
 * ```
 *
 * Every try snapshots the registry afresh (a try after a failure carries the rows claimed
 * meanwhile), Claimed rows included: no row waiting in a buffer may lose its lease. The beat that
 * took one of the namespace's periodic passes (recovery) starts it beside the loop. A non-transient error stops the
 * worker at once (a missing schema as SchemaNotMigratedError).
 *
 * "No heartbeat for a whole lease" is judged at the checks: the last confirmed renewal started at
 * least a lease ago, AND the worker has spent at least H of its own running time trying to beat.
 * Time the process spent stalled (a long GC pause, SIGSTOP, a frozen VM) counts at most H/2, so a
 * worker that was merely stalled gets a fair try first: its first beat after the stall learns
 * which leases it lost, and its deadlines have already aborted those handlers.
 *
 * The returned Observable never errors; it completes after a fatal error.
 */
export function heartbeat(config: HeartbeatConfig): Observable<unknown> {
  const { registry, clock, scheduler, logger } = config;
  const H = clock.heartbeatIntervalMs;
  let lastSuccessAt = config.startedAt;
  /** A beat is under way and has not succeeded yet. */
  let beating = false;
  /** Running time spent on the current beat (stalls count at most H/2 each). */
  let tryingMs = 0;
  let lastError: unknown;
  let healthy = true;
  let fatal = false;
  /** A lease passed without a beat while the worker held nothing: said once per outage. */
  let keptOn = false;
  const setHealthy = (value: boolean) => {
    if (value !== healthy) {
      healthy = value;
      if (value) logger.info('heartbeat succeeded again: claiming resumes');
      config.onHealth(value);
    }
  };
  const stop = (err: unknown) => {
    if (fatal) return;
    fatal = true;
    config.onFatal(err);
  };

  const random = config.random ?? Math.random;
  const shouldRetry = (err: unknown): boolean => {
    if (fatal) return false;
    lastError = err;
    setHealthy(false);
    if (isTransientDbError(err)) return true;
    if (isSchemaError(err)) {
      logger.error({ err }, 'the acta schema is missing or out of date: stopping');
      stop(new SchemaNotMigratedError(errorText(err)));
    } else {
      logger.error({ err }, 'heartbeat failed with a non-transient error: stopping');
      stop(err);
    }
    return false;
  };

  const beatOnce = () => {
    let tryStartedAt = scheduler.now();
    beating = true;
    return defer(() => {
      tryStartedAt = scheduler.now();
      return config.beat(registry.heldPairs());
    }).pipe(
      retryBackoff<HeartbeatResult>({
        initialMs: Math.min(1_000, H / 4),
        maxMs: Math.min(H, PIPELINE.unreachableRetryMaxMs),
        delayMs: (retryNumber) => beatRetryDelayMs(retryNumber, scheduler.now(), earliestDeadline(registry), H, random),
        retryNow$: config.reachable$,
        scheduler,
        shouldRetry,
        onRetry: (err, retryNumber, delayMs) => logger.warn({ ...retryErrorFields(err, retryNumber), retry: retryNumber, delayMs }, 'heartbeat failed (transient); repeating'),
      }),
      tap((result) => {
        if (fatal) return;
        lastSuccessAt = Math.max(lastSuccessAt, tryStartedAt);
        beating = false;
        tryingMs = 0;
        keptOn = false;
        setHealthy(true);
        const deadlineAt = tryStartedAt + clock.attemptDeadlineMs;
        for (const list of [result.renewed, result.cancel]) {
          for (const pair of list) {
            const entry = registry.get(pair.id);
            if (entry && entry.row.execution === pair.execution) entry.deadlineAt = Math.max(entry.deadlineAt, deadlineAt);
          }
        }
        for (const pair of result.cancel) config.onCancel?.(pair);
        const lost: Entry[] = [];
        for (const pair of result.lost) {
          const entry = registry.get(pair.id);
          if (!entry || entry.row.execution !== pair.execution || entry.state === 'finalizing') continue;
          lost.push(entry);
          registry.abort(entry, 'lost');
          config.onLost?.(entry);
          // Still in the claimer's hands: no executor will write for it, and the row has moved on.
          if (!entry.taken) registry.remove(entry);
        }
        if (lost.length > 0) logger.warn({ ...attemptsFields(lost) }, 'leases lost: cancelling the attempts');
        for (const name of result.duePasses) config.startPass(name);
        config.onPolicyVersion?.(result.policyVersion);
      }),
      // Only a fatal error gets past the retry, and onFatal has it already.
      catchError(() => EMPTY),
    );
  };

  // Every H from the start: the worker's registration was its first beat (register_worker.sql);
  // and at once when LISTEN comes up while attempts are held. After a fatal error nothing more is
  // started: the Observable completes.
  const early$ = (config.listening$ ?? EMPTY).pipe(filter(() => registry.size > 0));
  const beats$ = merge(timer(H, H, scheduler), early$).pipe(takeWhile(() => !fatal), exhaustMap(() => beatOnce()));

  let lastCheckAt = scheduler.now();
  const checks$ = interval(Math.max(10, H / 4), scheduler).pipe(
    takeWhile(() => !fatal),
    tap(() => {
      const now = scheduler.now();
      const elapsed = Math.min(now - lastCheckAt, H / 2);
      lastCheckAt = now;
      const passed = registry.snapshot().filter((entry) => entry.state !== 'finalizing' && now >= entry.deadlineAt && !entry.aborted);
      for (const entry of passed) registry.abort(entry, 'deadline');
      if (passed.length > 0) logger.warn({ ...attemptsFields(passed) }, 'attempt deadlines passed: aborting the attempts');
      if (!beating) return;
      tryingMs += elapsed;
      // A beat that neither succeeds nor fails (a connection that hangs) counts as failing.
      if (tryingMs >= H && healthy) {
        logger.warn({ waitedMs: Math.round(tryingMs) }, 'heartbeat unanswered for H: claiming stops until it answers');
        setHealthy(false);
      }
      const sinceMs = now - lastSuccessAt;
      if (sinceMs < clock.leaseMs || tryingMs < H) return;
      if (registry.size > 0) {
        logger.error({ err: lastError, sinceMs }, 'no heartbeat succeeded for a whole lease: stopping');
        stop(new HeartbeatLostError(sinceMs, { cause: lastError }));
      } else if (!keptOn) {
        keptOn = true;
        logger.warn({ err: lastError, sinceMs }, 'no heartbeat succeeded for a whole lease; this worker holds no attempts, so it keeps trying');
      }
    }),
  );
  return merge(beats$, checks$);
}
