import { asyncScheduler, defer, type Observable as Obs, Observable, type SchedulerLike, Subscription } from 'rxjs';
import { monotonicScheduler, setImmediateScheduler } from '../../operators';
import type { ClaimedRow } from '../db/types';
import type { Permits } from './permits';

/** A claim call's answer: what it claimed (as the claim hands it on), and, when nothing, ms until the next row is due (null: none). */
export interface ClaimAnswer<T> {
  rows: T[];
  nextDueInMs: number | null;
}

/** Dependencies and settings of {@link claimer}; `T` is what a claim hands on (the worker: registry entries). */
export interface ClaimerConfig<T = ClaimedRow> {
  permits: Permits;
  /** Wakeups (NOTIFY, Redis, a worker's own hints). They only shorten waits; SQL polling is truth. */
  wakeup$: Obs<unknown>;
  /** Backpressure: claiming stops while this is false (the completed channel is full, or the heartbeat fails). */
  intakeOpen$: Obs<boolean>;
  /** One claim call for up to `n` rows (one round trip). */
  claim: (n: number) => Obs<ClaimAnswer<T>>;
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
 * The claimer (docs/DESIGN.md, "The pipeline inside one worker": Claimer). Emits each
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
 * The decisions are {@link claimerStep}, a pure function of the state, the event and the free
 * permits; this Observable is its shell (timers, the claim call, permits, the output).
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
export function claimer<T = ClaimedRow>(config: ClaimerConfig<T>): Observable<T[]> {
  const scheduler = config.scheduler ?? asyncScheduler;
  // "One tick later" in real time is the next check phase (setImmediate), not asyncScheduler's
  // 0 ms, which is a ≥ 1 ms timer: at 8 rows per claim that clamp alone would cap a worker
  // near 8 000 jobs/s. Under a TestScheduler the tick stays in virtual time.
  const tickScheduler = scheduler === asyncScheduler || scheduler === monotonicScheduler ? setImmediateScheduler : scheduler;
  const settings: ClaimerSettings = { safetyPollMs: config.safetyPollMs, pollFloorMs: config.pollFloorMs, jitterMs: config.jitterMs, random: config.random ?? Math.random };
  const { permits } = config;
  return new Observable<T[]>((subscriber) => {
    let state = INITIAL_CLAIMER_STATE;
    let timer: Subscription | null = null;
    let inFlight: { asked: number; subscription: Subscription } | null = null;
    // Events raised while a decision's effects are applied (a synchronous claim answer, a permit
    // freed during the hand-over) wait for it: one decision at a time, in arrival order.
    const queue: ClaimerEvent[] = [];
    let deciding = false;

    const dispatch = (event: ClaimerEvent) => {
      queue.push(event);
      if (deciding) return;
      deciding = true;
      try {
        for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
          if (subscriber.closed) return;
          const decision = claimerStep(state, next, permits.available, settings);
          state = decision.state;
          for (const effect of decision.effects) apply(effect);
        }
      } finally {
        deciding = false;
      }
    };

    const apply = (effect: ClaimerEffect) => {
      switch (effect.type) {
        case 'claim':
          return startClaim();
        case 'emit':
          return subscriber.next(effect.rows as T[]);
        case 'giveBack':
          return permits.giveBack(effect.n);
        case 'arm':
          timer?.unsubscribe();
          timer = (effect.ms === 0 ? tickScheduler : scheduler).schedule(() => {
            timer = null;
            dispatch(TIMER);
          }, effect.ms);
          return;
        case 'disarm':
          timer?.unsubscribe();
          timer = null;
          return;
        case 'reportError':
          return config.onClaimError?.(effect.err);
      }
    };

    const startClaim = () => {
      const asked = permits.takeAll();
      // `call` exists before the claim subscribes, so an answer that comes synchronously cannot
      // be confused with the next call's.
      const call = { asked, subscription: new Subscription() };
      inFlight = call;
      let answered = false;
      const settle = (event: ClaimerEvent) => {
        if (answered) return;
        answered = true;
        if (inFlight === call) inFlight = null;
        call.subscription.unsubscribe();
        dispatch(event);
      };
      call.subscription.add(
        defer(() => config.claim(asked)).subscribe({
          next: (result) => settle({ type: 'answered', asked, result }),
          error: (err) => settle({ type: 'failed', asked, err }),
          complete: () => settle({ type: 'failed', asked, err: new Error('the claim call completed without an answer') }),
        }),
      );
    };

    const releasedSubscription = permits.released$.subscribe(() => dispatch(RELEASED));
    const wakeupSubscription = config.wakeup$.subscribe(() => dispatch(WAKEUP));
    const intakeSubscription = config.intakeOpen$.subscribe((open) => dispatch(open ? INTAKE_OPEN : INTAKE_SHUT));
    dispatch(START);

    return () => {
      timer?.unsubscribe();
      timer = null;
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

/**
 * ready: claims as soon as a permit is free; claiming: a call is in flight; collecting: after a
 * productive claim; sleeping: after an empty claim; backoff: after a failed one.
 */
export type ClaimerPhase = 'ready' | 'claiming' | 'collecting' | 'sleeping' | 'backoff';

/** What the claimer's decisions depend on, besides the free permits of the moment. */
export interface ClaimerState {
  readonly phase: ClaimerPhase;
  readonly intakeOpen: boolean;
  /** The claimer's one timer is armed (a tick, a sleep, a back-off or the collecting poll). */
  readonly timerArmed: boolean;
  /** A wakeup arrived while the claim was in flight. */
  readonly wakeupPending: boolean;
  /** An executor freed a permit while the claim was in flight. */
  readonly releasedDuringClaim: boolean;
}

export const INITIAL_CLAIMER_STATE: ClaimerState = { phase: 'ready', intakeOpen: true, timerArmed: false, wakeupPending: false, releasedDuringClaim: false };

/** What happens to the claimer. */
export type ClaimerEvent =
  | { readonly type: 'start' | 'released' | 'wakeup' | 'timer' }
  | { readonly type: 'intake'; readonly open: boolean }
  | { readonly type: 'answered'; readonly asked: number; readonly result: ClaimAnswer<unknown> }
  | { readonly type: 'failed'; readonly asked: number; readonly err: unknown };

const START: ClaimerEvent = { type: 'start' };
const RELEASED: ClaimerEvent = { type: 'released' };
const WAKEUP: ClaimerEvent = { type: 'wakeup' };
const TIMER: ClaimerEvent = { type: 'timer' };
const INTAKE_OPEN: ClaimerEvent = { type: 'intake', open: true };
const INTAKE_SHUT: ClaimerEvent = { type: 'intake', open: false };

/** What the shell does, in order: claim with every free permit, hand rows on, give permits back, (re)arm or clear the timer (0: a tick), report a failed claim. */
export type ClaimerEffect =
  | { readonly type: 'claim' }
  | { readonly type: 'emit'; readonly rows: readonly unknown[] }
  | { readonly type: 'giveBack'; readonly n: number }
  | { readonly type: 'arm'; readonly ms: number }
  | { readonly type: 'disarm' }
  | { readonly type: 'reportError'; readonly err: unknown };

/** The claimer's timing (DESIGN.md, "Claimer") and its jitter source. */
export interface ClaimerSettings {
  safetyPollMs: number;
  pollFloorMs: number;
  jitterMs: number;
  random: () => number;
}

const CLAIM: ClaimerEffect = { type: 'claim' };
const TICK: ClaimerEffect = { type: 'arm', ms: 0 };
const DISARM: ClaimerEffect = { type: 'disarm' };
const NOTHING: readonly ClaimerEffect[] = [];

/**
 * The claimer's decisions as a pure function: the next state and the effects of `event`, given
 * the permits free at that moment (the rules in {@link claimer}'s comment, one case each).
 */
export function claimerStep(state: ClaimerState, event: ClaimerEvent, permitsFree: number, settings: ClaimerSettings): { state: ClaimerState; effects: readonly ClaimerEffect[] } {
  /** Claims now if it may: ready, no timer, intake open, a permit free. */
  const tryClaim = (s: ClaimerState, free: number, before: readonly ClaimerEffect[] = NOTHING) =>
    s.phase === 'ready' && !s.timerArmed && s.intakeOpen && free >= 1
      ? { state: { ...s, phase: 'claiming' as const, wakeupPending: false, releasedDuringClaim: false }, effects: [...before, CLAIM] }
      : { state: s, effects: before };
  /** Ready after one tick: gathers the permits freed in the same burst, then claims. */
  const readyNextTick = (s: ClaimerState, before: readonly ClaimerEffect[] = NOTHING) => ({ state: { ...s, phase: 'ready' as const, timerArmed: true }, effects: [...before, TICK] });
  /** Ready when a timer of `ms` fires (a sleep, a back-off, the collecting poll). */
  const waitFor = (s: ClaimerState, phase: ClaimerPhase, ms: number, before: readonly ClaimerEffect[]) => ({ state: { ...s, phase, timerArmed: true }, effects: [...before, { type: 'arm' as const, ms }] });

  switch (event.type) {
    case 'start':
      return tryClaim(state, permitsFree);
    case 'timer':
      return tryClaim({ ...state, phase: 'ready', timerArmed: false }, permitsFree);
    case 'intake': {
      const next = { ...state, intakeOpen: event.open };
      return event.open ? tryClaim(next, permitsFree) : { state: next, effects: NOTHING };
    }
    case 'released':
      switch (state.phase) {
        case 'claiming':
          return { state: { ...state, releasedDuringClaim: true }, effects: NOTHING };
        case 'collecting':
          return readyNextTick(state);
        case 'ready':
          return state.timerArmed ? { state, effects: NOTHING } : readyNextTick(state);
        default:
          // sleeping: the last claim found nothing, the permit waits for the next one;
          // backoff: the database is failing, keep the back-off.
          return { state, effects: NOTHING };
      }
    case 'wakeup':
      switch (state.phase) {
        case 'claiming':
          return { state: { ...state, wakeupPending: true }, effects: NOTHING };
        case 'sleeping':
          return tryClaim({ ...state, phase: 'ready', timerArmed: false }, permitsFree, [DISARM]);
        case 'collecting':
          return permitsFree > 0 ? readyNextTick(state) : { state, effects: NOTHING };
        default:
          // ready: a free permit claims anyway; backoff: the database is failing, keep the back-off.
          return { state, effects: NOTHING };
      }
    case 'failed': {
      const effects: ClaimerEffect[] = [{ type: 'giveBack', n: event.asked }, { type: 'arm', ms: settings.safetyPollMs }, { type: 'reportError', err: event.err }];
      return { state: { ...state, phase: 'backoff', timerArmed: true }, effects };
    }
    case 'answered': {
      const { asked, result } = event;
      const got = result.rows.length;
      if (got === 0) {
        const giveBack: ClaimerEffect[] = [{ type: 'giveBack', n: asked }];
        if (state.wakeupPending) return tryClaim({ ...state, phase: 'ready' }, permitsFree + asked, giveBack);
        const due = result.nextDueInMs ?? settings.safetyPollMs;
        const sleepMs = Math.max(settings.pollFloorMs, Math.min(settings.safetyPollMs, due)) + settings.random() * settings.jitterMs;
        return waitFor(state, 'sleeping', sleepMs, giveBack);
      }
      // Hand the rows over first, so the executors take them before any permit comes back.
      const handOver: ClaimerEffect[] = [{ type: 'emit', rows: result.rows }];
      if (asked > got) handOver.push({ type: 'giveBack', n: asked - got });
      const collecting = { ...state, phase: 'collecting' as const };
      if (permitsFree + asked - got < 1) return { state: collecting, effects: handOver }; // every permit is busy: the next release claims
      if (state.wakeupPending || state.releasedDuringClaim) return readyNextTick(collecting, handOver);
      // Free permits from a partial claim: still collecting; new work is found by a freed permit,
      // a wakeup, or at the latest the safety poll.
      return waitFor(collecting, 'collecting', settings.safetyPollMs, handOver);
    }
  }
}
