import { type SchedulerLike } from 'rxjs';
import type { Logger } from 'pino';
import { PIPELINE } from '../config';
import type { Entry, Registry } from './registry';

/** What a graceful shutdown drives; worker.ts wires it. */
export interface ShutdownDeps {
  registry: Registry;
  logger: Logger;
  scheduler: SchedulerLike;
  /** How long to wait for running handlers, and then for the last completion writes, ms. */
  shutdownTimeoutMs: number;
  /** Ends the claimer now (no further claim is started). */
  stopClaiming: () => void;
  /** The claim call in flight, if any: its rows must be in the registry before the sweep. */
  claimInFlight: () => Promise<unknown>;
  /** Hands an entry no executor holds straight to the finalizer as `handed_back` (uncharged). */
  handBack: (entry: Entry) => void;
  /** Resolves once every executor has handed its completion to the finalizer. */
  executorsDone: () => Promise<void>;
  /** No more completions: the finalizer writes what it holds, then completes. */
  closeFinalizer: () => void;
  /** Resolves once the finalizer has written everything. */
  finalizerDone: () => Promise<void>;
  /** Stops repeating failed completion writes (their rows will be recovered). */
  abandonFinalizer: () => void;
  /** The completions hooks hold after their runs ended go on to the write now (hooks.ts, releaseHeld$). */
  releaseHeld?: () => void;
}

/**
 * The graceful shutdown of one worker (test/faults/shutdown.test.ts), for SIGINT/SIGTERM and
 * `worker.stop()`:
 *
 * 1. stop claiming at once (a claim already in flight is awaited, up to the timeout);
 * 2. hand back every Claimed-but-not-started row at once, uncharged (an entry an executor holds
 *    is aborted and handed back by it; one still in the claimer's hands is handed back here);
 * 3. wait up to `shutdownTimeoutMs` for running handlers to finish (their outcomes are written
 *    as usual; the heartbeat keeps renewing their leases meanwhile);
 * 4. then abort the rest (AbortSignal reason 'shutdown') and hand their rows back without
 *    spending an attempt (`handed_back`, charged false), whether or not the handler obeys, and
 *    write the completions an `aroundHandler` hook still holds as their runs ended;
 * 5. write every completion, waiting up to `shutdownTimeoutMs` more, and at least until a failed
 *    write's first repeat would be due (1 s, PIPELINE.writeRetryInitialMs), so a write to a
 *    healthy database always lands; what cannot be written by then is left to recovery.
 *
 * Resolves when done; never rejects.
 */
export async function shutdown(deps: ShutdownDeps): Promise<void> {
  const { registry, logger, scheduler, shutdownTimeoutMs } = deps;
  const within = <T>(work: Promise<T>) => raceTimeout(work, shutdownTimeoutMs, scheduler);

  deps.stopClaiming();
  if ((await within(deps.claimInFlight().catch(() => undefined))) === 'timeout') {
    logger.warn({ timeoutMs: shutdownTimeoutMs }, 'the claim in flight did not answer before the shutdown timeout; its rows will be recovered');
  }

  let unstarted = 0;
  for (const entry of registry.snapshot()) {
    if (entry.state !== 'claimed') continue;
    unstarted++;
    registry.abort(entry, 'shutdown');
    if (!entry.taken) deps.handBack(entry);
  }
  const running = registry.snapshot().filter((e) => e.state === 'executing').length;
  logger.info({ unstartedHandedBack: unstarted, running, timeoutMs: shutdownTimeoutMs }, 'stopping: claiming stopped, waiting for running handlers');

  if ((await within(deps.executorsDone())) === 'timeout') {
    const still = registry.snapshot().filter((e) => e.state === 'executing' || e.state === 'claimed');
    // Named (the first 100), so an operator can follow each job to its next worker. None running:
    // what held the stop is a completion an aroundHandler holds, which releaseHeld reports.
    if (still.length > 0) logger.warn({ running: still.length, jobIds: still.slice(0, 100).map((e) => e.row.id) }, 'shutdown timeout: aborting running handlers; their rows go back uncharged');
    for (const entry of still) {
      registry.abort(entry, 'shutdown');
      if (!entry.taken) deps.handBack(entry);
    }
    deps.releaseHeld?.();
    await deps.executorsDone();
  }

  deps.closeFinalizer();
  // At least until a failed write's first repeat would be due: with a timeout of 0 (or a few ms)
  // the hand-backs just queued were abandoned before their write could land, and their rows
  // stayed Executing until recovery (test/faults/shutdown.test.ts, "shutdownTimeoutMs 0: running
  // handlers are aborted at once and their rows still go back").
  const writeMs = Math.max(shutdownTimeoutMs, PIPELINE.writeRetryInitialMs);
  if ((await raceTimeout(deps.finalizerDone(), writeMs, scheduler)) === 'timeout') {
    logger.error({ held: registry.size }, 'completions could not be written before the shutdown timeout; their rows will be recovered');
    deps.abandonFinalizer();
  }
}

/**
 * `work`'s value, or 'timeout' if `ms` pass first. The timer is cancelled as soon as `work`
 * settles, so a finished race keeps no timer (and no process) alive.
 */
export function raceTimeout<T>(work: Promise<T>, ms: number, scheduler: SchedulerLike): Promise<T | 'timeout'> {
  return new Promise<T | 'timeout'>((resolve, reject) => {
    const timer = scheduler.schedule(() => resolve('timeout'), ms);
    work.then(
      (value) => {
        timer.unsubscribe();
        resolve(value);
      },
      (err: unknown) => {
        timer.unsubscribe();
        reject(err);
      },
    );
  });
}
