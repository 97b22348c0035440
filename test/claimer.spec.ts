import { EMPTY, map, NEVER, type Observable, of, startWith, Subject, tap } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { claimer, type ClaimerConfig, claimerStep, INITIAL_CLAIMER_STATE } from '../src/worker/claimer';
import type { ClaimedRow, ClaimResult } from '../src/db/types';
import { Permits } from '../src/worker/permits';

type Cold = <T>(marbles: string, values?: Record<string, T>, error?: unknown) => Observable<T>;

/** DESIGN.md's claimer timing: safety poll 1 s, poll floor 50 ms, idle jitter up to 100 ms. */
const TIMING = { safetyPollMs: 1_000, pollFloorMs: 50, jitterMs: 100 } as const;

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

/** One scripted answer of the claim call. `rows`: how many rows it finds ('all': as many as asked). */
interface Answer {
  /** How long the call takes, ms (default 2). */
  ms?: number;
  rows?: number | 'all';
  nextDueInMs?: number | null;
  error?: unknown;
}

let rowSeq = 0;
const row = (): ClaimedRow => ({ id: `j${++rowSeq}`, definition: 'd', payload: null, execution: 1, attempts: 0, maxAttempts: 25, unchargedReturns: 0, priority: 0 });

interface HarnessOptions extends Partial<Omit<ClaimerConfig, 'permits' | 'claim' | 'scheduler'>> {
  permits?: number | Permits;
  /** Answers of the claim calls, in order; when they run out: nothing found, nothing due. */
  answers?: Answer[];
  /** How long each executor runs before it releases its permit, in claim order (missing: forever). */
  runMs?: number[];
}

/**
 * The claimer wired as worker.ts wires it, in virtual time: scripted claim calls, simulated
 * executors that release one permit each `runMs` after their row arrives, and a log of every
 * claim call as [time, rows asked].
 */
function harness(scheduler: TestScheduler, cold: Cold, options: HarnessOptions) {
  const permits = typeof options.permits === 'object' ? options.permits : new Permits(options.permits ?? 4);
  const answers = [...(options.answers ?? [])];
  const runMs = [...(options.runMs ?? [])];
  const claims: [number, number][] = [];
  const claim$ = new Subject<number>();
  const released: [number, number][] = [];
  permits.released$.subscribe((n) => released.push([scheduler.now(), n]));
  const claimErrors: unknown[] = [];
  const claim = (n: number): Observable<ClaimResult> => {
    claims.push([scheduler.now(), n]);
    claim$.next(n);
    const answer = answers.shift() ?? { rows: 0, nextDueInMs: null };
    const lead = '-'.repeat(answer.ms ?? 2);
    if (answer.error !== undefined) return cold<ClaimResult>(`${lead}#`, undefined, answer.error);
    const count = answer.rows === 'all' ? n : Math.min(n, answer.rows ?? 0);
    const result: ClaimResult = { rows: Array.from({ length: count }, row), nextDueInMs: count > 0 ? null : (answer.nextDueInMs ?? null) };
    return cold<ClaimResult>(`${lead}(r|)`, { r: result });
  };
  const claimed$ = claimer({
    permits,
    wakeup$: options.wakeup$ ?? NEVER,
    intakeOpen$: options.intakeOpen$ ?? of(true),
    claim,
    safetyPollMs: options.safetyPollMs ?? TIMING.safetyPollMs,
    pollFloorMs: options.pollFloorMs ?? TIMING.pollFloorMs,
    jitterMs: options.jitterMs ?? TIMING.jitterMs,
    random: options.random ?? (() => 0),
    onClaimError: (err) => claimErrors.push(err),
    scheduler,
  }).pipe(
    tap((rows) => {
      for (const _ of rows) {
        const ms = runMs.shift();
        if (ms !== undefined) scheduler.schedule(() => permits.release(1), ms);
      }
    }),
    map((rows) => rows.length),
  );
  return { claimed$, claims, claim$, permits, released, claimErrors };
}

describe('claimer', () => {
  it('the doc-comment diagram: a claim for every free permit; permits freed together bring ONE claim a tick later', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      const h = harness(scheduler, cold, { permits: 2, answers: [{ rows: 'all' }, { rows: 0, nextDueInMs: null }], runMs: [3, 3] });
      const window = '^ 1100ms !';
      expectObservable(h.claim$, window).toBe('c----c 1001ms c', { c: 2 });
      expectObservable(h.permits.released$, window).toBe('-----(11)', { 1: 1 });
      expectObservable(h.claimed$, window).toBe('--R', { R: 2 });
      flush();
      expect(h.claims).toEqual([
        [0, 2], // both permits free: one claim for both
        [5, 2], // both executors free their permit at 5: one claim(2) a tick later, not claim(1) twice
        [1_007, 2], // that claim found nothing at 7: sleep min(1000, max(50, null → 1000)) + 0 · 100
      ]);
    });
  });

  describe('(a) permits', () => {
    it('claims at once for every free permit, in one call', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, expectObservable, flush }) => {
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 'all' }] });
        expectObservable(h.claimed$, '^ 100ms !').toBe('--r', { r: 4 });
        flush();
        expect(h.claims).toEqual([[0, 4]]);
        expect(h.permits.available).toBe(0);
      });
    });

    it('waits for one permit, then takes every other free one (those freed in the same tick too)', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, expectObservable, flush }) => {
        const permits = new Permits(4);
        permits.takeAll(); // all four busy
        const h = harness(scheduler, cold, { permits, answers: [{ rows: 'all' }] });
        scheduler.schedule(() => permits.release(1), 30);
        scheduler.schedule(() => permits.release(2), 30);
        scheduler.schedule(() => permits.release(1), 40);
        expectObservable(h.claimed$, '^ 100ms !').toBe('32ms r', { r: 3 });
        flush();
        expect(h.claims).toEqual([
          [30, 3],
          [40, 1], // the claim at 30 used all its permits: the one freed at 40 claims a tick later
        ]);
      });
    });
  });

  describe('(b) collecting after a claim that found work', () => {
    it('claims again a tick after an executor frees a permit, for every permit free then, not once per permit', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush, expectObservable }) => {
        // claim(4) finds 4 rows; executors end at 2+8, 2+8, 2+18, 2+28.
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 'all' }, { rows: 'all' }, { rows: 'all' }, { rows: 'all' }], runMs: [8, 8, 18, 28] });
        expectObservable(h.claimed$, '^ 200ms !').toBe('--a---------b---------c---------d', { a: 4, b: 2, c: 1, d: 1 });
        flush();
        expect(h.claims).toEqual([
          [0, 4],
          [10, 2], // two permits freed at 10: one claim for both
          [20, 1],
          [30, 1],
        ]);
      });
    });

    it('gives the permits a partial claim did not use back at once and silently, and does not claim again with them at once', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 1 }, { rows: 0 }], runMs: [20] });
        const seen: [number, number][] = [];
        const s = h.claimed$.subscribe(() => scheduler.schedule(() => seen.push([scheduler.now(), h.permits.available]), 0));
        scheduler.schedule(() => seen.push([scheduler.now(), h.permits.available]), 1);
        scheduler.schedule(() => s.unsubscribe(), 500);
        flush();
        expect(seen).toEqual([
          [1, 0], // claim in flight: all four taken
          [2, 3], // one row found at 2: the other three are back in the same frame
        ]);
        expect(h.released).toEqual([[22, 1]]); // giveBack is silent: only the executor's release shows
        expect(h.claims.slice(0, 2)).toEqual([
          [0, 4],
          [22, 4], // not at 2 with the three unused permits: a tick after the executor frees its one
        ]);
      });
    });

    it('counts a permit freed while the claim was in flight: a full claim is followed a tick after its answer', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        // claim(3) finds 3 rows at 2; executor 1 ends at 10; claim(1) at 10 runs until 15 and finds
        // one row; executor 2 ends at 12, during that claim; executor 3 at 500.
        const h = harness(scheduler, cold, { permits: 3, answers: [{ rows: 'all' }, { rows: 'all', ms: 5 }, { rows: 'all' }], runMs: [8, 10, 498, 1_000, 1_000] });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 400);
        flush();
        expect(h.claims).toEqual([
          [0, 3],
          [10, 1],
          [15, 1], // the permit freed at 12 is not left idle until the next release or a safety poll
        ]);
      });
    });
  });

  describe('(c) an empty claim sleeps max(floor, min(safety poll, next due)) + random · jitter', () => {
    const sleepAfterEmpty = (nextDueInMs: number | null, random: number) => {
      const scheduler = newScheduler();
      let second = NaN;
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { permits: 2, answers: [{ rows: 0, nextDueInMs, ms: 2 }], random: () => random });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 5_000);
        flush();
        second = h.claims[1][0];
        expect(h.claims[1][1]).toBe(2); // every permit came back for the next claim
      });
      return second - 2; // the first claim answered at 2
    };

    it('a row due now sleeps the floor, 50 ms', () => expect(sleepAfterEmpty(0, 0)).toBe(50));
    it('a row due in 10 s sleeps the safety poll, 1 000 ms', () => expect(sleepAfterEmpty(10_000, 0)).toBe(1_000));
    it('a row due in between sleeps until it is due', () => expect(sleepAfterEmpty(300, 0)).toBe(300));
    it('a row due in 20 ms still sleeps the floor', () => expect(sleepAfterEmpty(20, 0)).toBe(50));
    it('nothing due (null) sleeps the safety poll', () => expect(sleepAfterEmpty(null, 0)).toBe(1_000));
    it('adds random · 100 ms of jitter: 0 → +0, 0.5 → +50, → 1 → just under +100', () => {
      expect(sleepAfterEmpty(300, 0.5)).toBe(350);
      expect(sleepAfterEmpty(0, 0.5)).toBe(100);
      expect(sleepAfterEmpty(null, 0.5)).toBe(1_050);
      const high = sleepAfterEmpty(300, 0.9999);
      expect(high).toBeGreaterThan(399.9);
      expect(high).toBeLessThan(400);
    });

    it('gives every permit back silently after an empty claim', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { permits: 3, answers: [{ rows: 0 }] });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => {
          expect(h.permits.available).toBe(3);
          s.unsubscribe();
        }, 3);
        flush();
        expect(h.released).toEqual([]);
      });
    });
  });

  describe('(d) wakeups', () => {
    it('a wakeup ends the idle sleep at once, and the old sleep does not fire later', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, { permits: 2, answers: [{ rows: 0 }, { rows: 0 }, { rows: 0 }], wakeup$: hot('100ms w') });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 1_500);
        flush();
        expect(h.claims).toEqual([
          [0, 2],
          [100, 2], // the wakeup, instead of the sleep ending at 1002
          [1_102, 2], // the new claim's own sleep
        ]);
      });
    });

    it('a wakeup during collecting claims a tick later with the free permits', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 1 }, { rows: 0 }], runMs: [10_000], wakeup$: hot('300ms w') });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 350);
        flush();
        expect(h.claims).toEqual([
          [0, 4],
          [300, 3],
        ]);
      });
    });
  });

  describe('(e) a failed claim', () => {
    it('backs off exactly one safety poll, reports the error, gives the permits back silently, and a wakeup does not shorten it', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const err = new Error('connection refused');
        const h = harness(scheduler, cold, {
          permits: 2,
          answers: [{ error: err, ms: 4 }, { rows: 0 }],
          wakeup$: hot('1ms w 100ms w 500ms w'),
          random: () => 0.9,
        });
        const s = h.claimed$.subscribe();
        let availableDuringBackoff = -1;
        scheduler.schedule(() => (availableDuringBackoff = h.permits.available), 1_003);
        scheduler.schedule(() => s.unsubscribe(), 1_010);
        flush();
        expect(h.claimErrors).toEqual([err]);
        expect(availableDuringBackoff).toBe(2);
        expect(h.released).toEqual([]);
        expect(h.claims).toEqual([
          [0, 2],
          [1_004, 2], // 4 + 1000: no jitter, not shortened by the wakeups at 1, 102 or 603
        ]);
      });
    });

    it('treats a claim call that completes without an answer as a failed claim', () => {
      const scheduler = newScheduler();
      scheduler.run(({ flush }) => {
        const permits = new Permits(2);
        const claims: number[] = [];
        const errors: unknown[] = [];
        const s = claimer({
          permits,
          wakeup$: NEVER,
          intakeOpen$: of(true),
          claim: () => {
            claims.push(scheduler.now());
            return EMPTY;
          },
          ...TIMING,
          onClaimError: (e) => errors.push(e),
          scheduler,
        }).subscribe();
        scheduler.schedule(() => s.unsubscribe(), 1_500);
        flush();
        expect(claims).toEqual([0, 1_000]);
        expect(errors).toHaveLength(2);
        expect(permits.available).toBe(2);
      });
    });
  });

  describe('(f) wakeups during a claim in flight', () => {
    it('several wakeups during an empty claim bring exactly one follow-up claim', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, { permits: 2, answers: [{ rows: 0, ms: 10 }, { rows: 0, ms: 10 }, { rows: 0 }], wakeup$: hot('--w-w-w') });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 2_000);
        flush();
        expect(h.claims).toEqual([
          [0, 2],
          [10, 2], // one follow-up for the three wakeups
          [1_020, 2], // then the ordinary sleep
        ]);
      });
    });

    it('several wakeups during a partial claim bring exactly one follow-up claim, a tick after the answer', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 2, ms: 10 }, { rows: 0 }], runMs: [5_000, 5_000], wakeup$: hot('--w-w-w') });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 1_100);
        flush();
        expect(h.claims).toEqual([
          [0, 4],
          [10, 2],
          [1_012, 2],
        ]);
      });
    });

    it('a wakeup during a full claim is served once, when a permit frees', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, { permits: 2, answers: [{ rows: 'all', ms: 10 }, { rows: 0 }], runMs: [100, 200], wakeup$: hot('--w-w') });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 1_000);
        flush();
        expect(h.claims).toEqual([
          [0, 2],
          [110, 1],
        ]);
      });
    });
  });

  describe('(g) intake', () => {
    it('claims nothing while intakeOpen$ is false and resumes when it turns true', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, {
          permits: 2,
          answers: [{ rows: 0 }, { rows: 0 }],
          intakeOpen$: hot<boolean>('50ms t', { t: true }).pipe(startWith(false)),
          wakeup$: hot('20ms w'),
        });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 500);
        flush();
        expect(h.claims).toEqual([[50, 2]]);
      });
    });

    it('a sleep, a wakeup or a freed permit claims nothing while intake is closed; reopening claims for every free permit', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, hot, flush }) => {
        const h = harness(scheduler, cold, {
          permits: 3,
          answers: [{ rows: 2 }, { rows: 0 }, { rows: 0 }],
          runMs: [8, 8],
          intakeOpen$: hot<boolean>('5ms f 1994ms t', { t: true, f: false }).pipe(startWith(true)),
          wakeup$: hot('1500ms w'),
        });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 2_100);
        flush();
        // claim(3) finds 2 at 2; intake closes at 5; executors free their permits at 10; the
        // partial claim's safety poll runs out at 1002; a wakeup at 1500: nothing is claimed.
        expect(h.claims).toEqual([
          [0, 3],
          [2_000, 3],
        ]);
      });
    });
  });

  describe('(h) a partial claim with free permits', () => {
    it('claims again at the latest one safety poll later, with no wakeup and no freed permit', () => {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { permits: 4, answers: [{ rows: 1 }, { rows: 0 }], runMs: [60_000] });
        const s = h.claimed$.subscribe();
        scheduler.schedule(() => s.unsubscribe(), 2_500);
        flush();
        expect(h.claims).toEqual([
          [0, 4],
          [1_002, 3],
          [2_004, 3],
        ]);
      });
    });
  });

  it('behaves the same when the claim call answers synchronously', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const h = harness(scheduler, cold, {
        permits: 2,
        answers: [{ rows: 'all', ms: 0 }, { rows: 0, ms: 0, nextDueInMs: 200 }, { rows: 0, ms: 0 }, { rows: 0, ms: 0 }],
        runMs: [10, 10],
        wakeup$: hot('500ms w'),
      });
      const s = h.claimed$.subscribe();
      scheduler.schedule(() => s.unsubscribe(), 1_000);
      flush();
      expect(h.claims).toEqual([
        [0, 2],
        [10, 2],
        [210, 2],
        [500, 2],
      ]);
    });
  });

  it('treats a claim call that throws as a failed claim', () => {
    const scheduler = newScheduler();
    scheduler.run(({ flush }) => {
      const permits = new Permits(3);
      const claims: number[] = [];
      const errors: unknown[] = [];
      const err = new Error('bad arguments');
      const s = claimer({
        permits,
        wakeup$: NEVER,
        intakeOpen$: of(true),
        claim: () => {
          claims.push(scheduler.now());
          throw err;
        },
        ...TIMING,
        onClaimError: (e) => errors.push(e),
        scheduler,
      }).subscribe();
      scheduler.schedule(() => s.unsubscribe(), 1_500);
      flush();
      expect(claims).toEqual([0, 1_000]);
      expect(errors).toEqual([err, err]);
      expect(permits.available).toBe(3);
    });
  });

  it('unsubscribing cancels the claim in flight and every timer', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush, expectObservable }) => {
      let claimObs: Observable<ClaimResult> | undefined;
      const permits = new Permits(2);
      const claims: number[] = [];
      const claimed$ = claimer({
        permits,
        wakeup$: NEVER,
        intakeOpen$: of(true),
        claim: () => {
          claims.push(scheduler.now());
          claimObs = cold<ClaimResult>('----(r|)', { r: { rows: [], nextDueInMs: null } });
          return claimObs;
        },
        ...TIMING,
        random: () => 0,
        scheduler,
      });
      expectObservable(claimed$, '^-!').toBe('');
      expectObservable(claimed$, '10ms ^ 10ms !').toBe('');
      flush();
      expect(claims).toEqual([0, 10]);
      expect((claimObs as unknown as { subscriptions: { subscribedFrame: number; unsubscribedFrame: number }[] }).subscriptions).toEqual([
        { subscribedFrame: 10, unsubscribedFrame: 14 },
      ]);
    });
  });
});

describe('claimerStep (the decisions, without timers or calls)', () => {
  const settings = { ...TIMING, random: () => 0 };
  const ready = INITIAL_CLAIMER_STATE;
  const rows = (n: number) => Array.from({ length: n }, row);

  test('a free permit claims; none free, or intake shut, waits', () => {
    expect(claimerStep(ready, { type: 'start' }, 2, settings)).toEqual({ state: { ...ready, phase: 'claiming' }, effects: [{ type: 'claim' }] });
    expect(claimerStep(ready, { type: 'start' }, 0, settings)).toEqual({ state: ready, effects: [] });
    const shut = claimerStep(ready, { type: 'intake', open: false }, 2, settings).state;
    expect(claimerStep(shut, { type: 'released' }, 1, settings).effects).toEqual([{ type: 'arm', ms: 0 }]);
    expect(claimerStep({ ...shut, timerArmed: false }, { type: 'timer' }, 1, settings).effects).toEqual([]);
  });

  test('a full claim hands its rows over and waits for a release; a partial one gives the rest back and polls', () => {
    const claiming = { ...ready, phase: 'claiming' as const };
    const full = claimerStep(claiming, { type: 'answered', asked: 2, result: { rows: rows(2), nextDueInMs: null } }, 0, settings);
    expect(full.state.phase).toBe('collecting');
    expect(full.effects.map((e) => e.type)).toEqual(['emit']);
    const partial = claimerStep(claiming, { type: 'answered', asked: 2, result: { rows: rows(1), nextDueInMs: null } }, 0, settings);
    expect(partial.effects.map((e) => e.type)).toEqual(['emit', 'giveBack', 'arm']);
    expect(partial.effects[2]).toEqual({ type: 'arm', ms: TIMING.safetyPollMs });
  });

  test('an empty claim sleeps until the next row is due, within the floor and the safety poll; a wakeup ends the sleep', () => {
    const claiming = { ...ready, phase: 'claiming' as const };
    const empty = claimerStep(claiming, { type: 'answered', asked: 2, result: { rows: [], nextDueInMs: 10 } }, 0, settings);
    expect(empty.effects).toEqual([{ type: 'giveBack', n: 2 }, { type: 'arm', ms: TIMING.pollFloorMs }]);
    expect(claimerStep(empty.state, { type: 'wakeup' }, 2, settings).effects).toEqual([{ type: 'disarm' }, { type: 'claim' }]);
  });

  test('a failed claim gives every permit back and backs off one safety poll, deaf to wakeups', () => {
    const failed = claimerStep({ ...ready, phase: 'claiming' }, { type: 'failed', asked: 3, err: 'x' }, 0, settings);
    expect(failed.effects).toEqual([{ type: 'giveBack', n: 3 }, { type: 'arm', ms: TIMING.safetyPollMs }, { type: 'reportError', err: 'x' }]);
    expect(claimerStep(failed.state, { type: 'wakeup' }, 3, settings).effects).toEqual([]);
  });
});
