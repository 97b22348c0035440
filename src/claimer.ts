import { asyncScheduler, defer, type Observable as Obs, Observable, type SchedulerLike, Subscription } from 'rxjs';
import { monotonicScheduler, setImmediateScheduler } from '../operators';
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
 * The claimer (shared/DESIGN.md, "Claimer"; seed 000, "What each stage decides"). Emits each
 * non-empty claim's rows; never errors, never completes (unsubscribe to stop it).
 *
 * - Waits for one permit, then takes every other free one, and claims that many rows in one call.
 *   A permit freed while no claim is pending brings a claim one scheduler tick later, so the
 *   permits freed in the same burst go into the same claim.
 * - After a claim that found work it collects: the rows go to the executors first, the permits the
 *   claim did not use go back at once (`giveBack`, silent), and it claims again only a tick after
 *   an executor frees a permit (or freed one while the claim was in flight), asking for every
 *   permit free then, not once per freed permit. With free permits left over (a partial claim)
 *   and nothing else happening, it claims again at the latest one safety poll later.
 * - An empty claim gives every permit back and sleeps until the next row is due (as the claim
 *   reported; null: the safety poll), at least `pollFloorMs`, at most `safetyPollMs`, plus
 *   random() · `jitterMs`; a wakeup ends the sleep at once.
 * - A failed claim (an error, a throw, or a call that completes without an answer) gives every
 *   permit back, reports the error to `onClaimError`, and backs off exactly one safety poll;
 *   wakeups do not shorten the back-off.
 * - Wakeups during a claim in flight cause exactly one more claim after it (several collapse into
 *   one): at once after an empty claim, a tick after a claim that found work (or, when it used
 *   every permit, when the next permit frees).
 * - While `intakeOpen$` is false nothing is claimed; when it turns true claiming resumes.
 * - Unsubscribing cancels the claim in flight (its permits go back) and every timer.
 *
 * The first test of test/claimer.spec.ts is exactly this diagram (2 permits, every claim call
 * takes 2 ms, each executor runs 3 ms, random() = 0, safety poll 1 000 ms):
 * ```
 * claims:   c----c 1001ms c             c = claim(2) at 0, at 5, at 1007
 * answers:  --R----E                    R = 2 rows at 2, E = empty (next due: null) at 7
 * released: -----(11)                   both executors free their permit at 5
 * output:   --R                         ONE claim(2) a tick after the releases, not claim(1) twice;
 *                                       after E it sleeps min(1000, max(50, 1000)) + 0 · 100 = 1000
 * ```
 */
export function claimer(config: ClaimerConfig): Observable<ClaimedRow[]> {
  const scheduler = config.scheduler ?? asyncScheduler;
  // "One tick later" in real time is the next check phase (setImmediate), not asyncScheduler's
  // 0 ms, which is a ≥ 1 ms timer: at 8 rows per claim that clamp alone would cap a worker
  // near 8 000 jobs/s. Under a TestScheduler the tick stays in virtual time.
  const tickScheduler = scheduler === asyncScheduler || scheduler === monotonicScheduler ? setImmediateScheduler : scheduler;
  const random = config.random ?? Math.random;
  const { permits } = config;
  return new Observable<ClaimedRow[]>((subscriber) => {
    // ready: claim as soon as a permit is free; claiming: a call is in flight;
    // collecting: after a productive claim; sleeping: after an empty claim; backoff: after a failed one.
    let state: 'ready' | 'claiming' | 'collecting' | 'sleeping' | 'backoff' = 'ready';
    let intakeOpen = true;
    /** A wakeup arrived while the claim was in flight. */
    let wakeupPending = false;
    /** An executor freed a permit while the claim was in flight. */
    let releasedDuringClaim = false;
    let timer: Subscription | null = null;
    let inFlight: { asked: number; subscription: Subscription } | null = null;

    const setTimer = (ms: number, fn: () => void) => {
      timer?.unsubscribe();
      timer = (ms === 0 ? tickScheduler : scheduler).schedule(() => {
        timer = null;
        fn();
      }, ms);
    };
    const clearTimer = () => {
      timer?.unsubscribe();
      timer = null;
    };
    /** Ready after one tick: gathers the permits freed in the same burst, then claims. */
    const readyNextTick = () => {
      state = 'ready';
      setTimer(0, tryClaim);
    };

    /** Ready after `ms` (a sleep, a back-off, or the safety poll while collecting), then claims. */
    const readyAfter = (ms: number) =>
      setTimer(ms, () => {
        state = 'ready';
        tryClaim();
      });

    const tryClaim = () => {
      if (subscriber.closed || state !== 'ready' || timer || !intakeOpen || permits.available < 1) return;
      const asked = permits.takeAll();
      state = 'claiming';
      wakeupPending = false;
      releasedDuringClaim = false;
      // `call` exists before the claim subscribes, so an answer that comes synchronously (and may
      // start the next claim) cannot be confused with the next call.
      const call = { asked, subscription: new Subscription() };
      inFlight = call;
      let answered = false;
      const settle = () => {
        answered = true;
        if (inFlight === call) inFlight = null;
        call.subscription.unsubscribe();
      };
      call.subscription.add(
        defer(() => config.claim(asked)).subscribe({
          next: (result) => {
            if (answered) return;
            settle();
            onClaimed(asked, result);
          },
          error: (err) => {
            if (answered) return;
            settle();
            onFailed(asked, err);
          },
          complete: () => {
            if (answered) return;
            settle();
            onFailed(asked, new Error('the claim call completed without an answer'));
          },
        }),
      );
    };

    const onFailed = (asked: number, err: unknown) => {
      permits.giveBack(asked);
      state = 'backoff';
      readyAfter(config.safetyPollMs);
      config.onClaimError?.(err);
    };

    const onClaimed = (asked: number, result: ClaimResult) => {
      const got = result.rows.length;
      if (got === 0) {
        permits.giveBack(asked);
        if (wakeupPending) {
          state = 'ready';
          tryClaim();
          return;
        }
        const due = result.nextDueInMs ?? config.safetyPollMs;
        const sleepMs = Math.max(config.pollFloorMs, Math.min(config.safetyPollMs, due)) + random() * config.jitterMs;
        state = 'sleeping';
        readyAfter(sleepMs);
        return;
      }
      state = 'collecting';
      // Hand the rows over first, so the executors take them before any permit comes back.
      subscriber.next(result.rows);
      permits.giveBack(Math.max(0, asked - got));
      // A release during the hand-over has already scheduled the next claim.
      if (subscriber.closed || state !== 'collecting' || timer) return;
      if (permits.available < 1) return; // every permit is busy: the next release claims
      if (wakeupPending || releasedDuringClaim) readyNextTick();
      // Free permits from a partial claim: still collecting; new work is found by a freed permit,
      // a wakeup, or at the latest the safety poll.
      else readyAfter(config.safetyPollMs);
    };

    const releasedSubscription = permits.released$.subscribe(() => {
      switch (state) {
        case 'claiming':
          releasedDuringClaim = true;
          break;
        case 'collecting':
          readyNextTick();
          break;
        case 'ready':
          if (!timer) readyNextTick();
          break;
        default:
          // sleeping: the last claim found nothing, the permit waits for the next one;
          // backoff: the database is failing, keep the back-off.
          break;
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
          if (permits.available > 0) readyNextTick();
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
      if (inFlight) {
        const { asked, subscription } = inFlight;
        inFlight = null;
        subscription.unsubscribe();
        permits.giveBack(asked);
      }
    };
  });
}
