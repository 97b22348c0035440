import { asyncScheduler, type Observable as Obs, Observable, type SchedulerLike, type Subscription } from 'rxjs';
import type { ClaimedRow, ClaimResult } from './db/functions';
import type { Permits } from './permits';

/** Dependencies and settings of {@link claimer}. */
export interface ClaimerConfig {
  permits: Permits;
  /** Wakeups (NOTIFY, Redis, a worker's own hints). They only shorten waits; SQL polling is truth. */
  wakeup$: Obs<unknown>;
  /** Backpressure: claiming stops while this is false (the completed channel is full, or the heartbeat fails). */
  intakeOpen$: Obs<boolean>;
  /** One claim call for up to `n` rows (one round trip). */
  claim: (n: number) => Obs<ClaimResult>;
  /** Longest idle sleep and the failed-claim back-off, ms (DESIGN.md: 1 000). */
  safetyPollMs: number;
  /** Shortest idle sleep, ms (DESIGN.md: 50). */
  pollFloorMs: number;
  /** Idle jitter bound, ms (DESIGN.md: 100): each idle sleep gets + random() · jitterMs. */
  jitterMs: number;
  /** Called with the error of a failed claim (before the back-off). */
  onClaimError?: (err: unknown) => void;
  /** Uniform [0, 1) (default Math.random). */
  random?: () => number;
  scheduler?: SchedulerLike;
}

/**
 * The claimer (shared/DESIGN.md, "Claimer"; seed 000). Emits each non-empty claim's rows.
 *
 * - Waits for one permit, then takes every other free one, and claims that many rows in one call.
 *   Unused permits go back at once.
 * - After a claim that found work it collects: it does not claim again with the permits already
 *   free, but waits until an executor frees one (then one more scheduler tick, to gather the
 *   others freed in the same burst), a wakeup arrives, or a safety poll passes; so the next claim
 *   asks for all of them instead of the one or two free at that instant.
 * - An empty claim sleeps until the next row is due (as the claim reported), at least
 *   `pollFloorMs`, at most `safetyPollMs`, plus up to `jitterMs`; a wakeup ends the sleep early.
 * - A failed claim backs off one safety poll (wakeups do not shorten it).
 * - A wakeup that arrives while a claim is in flight causes exactly one more claim afterwards
 *   (several collapse into one).
 * - While `intakeOpen$` is false, nothing is claimed.
 *
 * ```
 * permits: 2 free      claim(2) → [a, b]    executors free 1 at frame 5, 1 at frame 5
 * claims:  c(2)---------------------c(2)     one claim for both, a tick after the first release
 * ```
 */
export function claimer(config: ClaimerConfig): Observable<ClaimedRow[]> {
  const scheduler = config.scheduler ?? asyncScheduler;
  const random = config.random ?? Math.random;
  const { permits } = config;
  return new Observable<ClaimedRow[]>((subscriber) => {
    // ready: claim as soon as a permit is free; claiming: a call is in flight;
    // collecting: after a productive claim; sleeping: after an empty claim; backoff: after a failed one.
    let state: 'ready' | 'claiming' | 'collecting' | 'sleeping' | 'backoff' = 'ready';
    let intakeOpen = true;
    let wakeupPending = false;
    let timer: Subscription | null = null;
    let claimSubscription: Subscription | null = null;

    const setTimer = (ms: number, fn: () => void) => {
      timer?.unsubscribe();
      timer = scheduler.schedule(() => {
        timer = null;
        fn();
      }, ms);
    };
    const clearTimer = () => {
      timer?.unsubscribe();
      timer = null;
    };

    /** Move to ready after one tick (gathers permits freed in the same burst), then claim. */
    const readyNextTick = () => {
      state = 'ready';
      setTimer(0, tryClaim);
    };

    const tryClaim = () => {
      if (subscriber.closed || state !== 'ready' || timer || !intakeOpen || permits.available < 1) return;
      const asked = permits.takeAll();
      state = 'claiming';
      wakeupPending = false;
      let settled = false;
      claimSubscription = config.claim(asked).subscribe({
        next: (result) => {
          if (settled) return;
          settled = true;
          onClaimed(asked, result);
        },
        error: (err) => {
          settled = true;
          claimSubscription = null;
          permits.giveBack(asked);
          config.onClaimError?.(err);
          state = 'backoff';
          setTimer(config.safetyPollMs, () => {
            state = 'ready';
            tryClaim();
          });
        },
        complete: () => {
          claimSubscription = null;
        },
      });
    };

    const onClaimed = (asked: number, result: ClaimResult) => {
      const got = result.rows.length;
      if (got > 0) {
        // Hand the rows over first, so the executors take them before any permit comes back.
        state = 'collecting';
        subscriber.next(result.rows);
      }
      if (subscriber.closed) return;
      if (got > 0) {
        state = 'collecting';
        permits.giveBack(asked - got);
        if (wakeupPending && permits.available > 0) {
          readyNextTick();
        } else if (permits.available > 0) {
          // Free permits from a partial claim: new work is found by a freed permit, a wakeup,
          // or at the latest the safety poll.
          setTimer(config.safetyPollMs, () => {
            state = 'ready';
            tryClaim();
          });
        }
        return;
      }
      permits.giveBack(asked);
      if (wakeupPending) {
        state = 'ready';
        tryClaim();
        return;
      }
      const due = result.nextDueInMs ?? config.safetyPollMs;
      const sleepMs = Math.min(config.safetyPollMs, Math.max(config.pollFloorMs, due)) + random() * config.jitterMs;
      state = 'sleeping';
      setTimer(sleepMs, () => {
        state = 'ready';
        tryClaim();
      });
    };

    const releasedSubscription = permits.released$.subscribe(() => {
      if (state === 'collecting') {
        clearTimer();
        readyNextTick();
      } else if (state === 'ready' && !timer) {
        setTimer(0, tryClaim);
      }
    });

    const wakeupSubscription = config.wakeup$.subscribe(() => {
      switch (state) {
        case 'claiming':
          wakeupPending = true;
          break;
        case 'sleeping':
          clearTimer();
          state = 'ready';
          tryClaim();
          break;
        case 'collecting':
          if (permits.available > 0) {
            clearTimer();
            readyNextTick();
          }
          break;
        default:
          // ready: a free permit claims anyway; backoff: the database is failing, keep the back-off.
          break;
      }
    });

    const intakeSubscription = config.intakeOpen$.subscribe((open) => {
      intakeOpen = open;
      if (open && state === 'ready') tryClaim();
    });

    tryClaim();

    return () => {
      clearTimer();
      releasedSubscription.unsubscribe();
      wakeupSubscription.unsubscribe();
      intakeSubscription.unsubscribe();
      claimSubscription?.unsubscribe();
    };
  });
}
