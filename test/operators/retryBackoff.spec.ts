import { defer, type Observable, of, throwError, VirtualTimeScheduler } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { backoffDelay, retryBackoff, type RetryBackoffConfig } from '../../operators';

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
const acta = { initialMs: 1_000, maxMs: 30_000, jitter: 0.25 };
const ALMOST_ONE = 1 - Number.EPSILON;

/** A source whose first `failures` subscriptions error after 2 ms and later ones emit 'a' and complete after 2 ms; records subscription times. */
function flaky(scheduler: TestScheduler, cold: (m: string, v?: Record<string, string>, e?: unknown) => Observable<string>, failures: number, err: unknown = new Error('boom')) {
  const subscribedAt: number[] = [];
  const source = defer(() => {
    subscribedAt.push(scheduler.now());
    return subscribedAt.length <= failures ? cold('--#', undefined, err) : cold('--(a|)');
  });
  return { source, subscribedAt };
}

describe('retryBackoff', () => {
  it('the doc-comment diagram: retries after 1 s, 2 s, 4 s, then gives up with the error', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, expectSubscriptions }) => {
      const err = new Error('boom');
      const source = cold('--#', undefined, err);
      const result = source.pipe(retryBackoff({ ...acta, maxRetries: 3, random: () => 0.5, scheduler }));
      expectObservable(result).toBe('7008ms #', undefined, err);
      expectSubscriptions(source.subscriptions).toBe(['^-!', '1002ms ^-!', '3004ms ^-!', '7006ms ^-!']);
    });
  });

  it('doubles the delay from 1 s and caps it at 30 s (random 0.5: no spread)', () => {
    const delays = Array.from({ length: 9 }, (_, i) => backoffDelay(i + 1, acta, () => 0.5));
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]);
    expect(backoffDelay(1_000, acta, () => 0.5)).toBe(30_000); // no overflow for a huge retry number
  });

  it('runs the schedule in virtual time: 1 s, 2 s, 4 s, 8 s, 16 s, 30 s, 30 s between the tries', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      const { source, subscribedAt } = flaky(scheduler, cold, 7);
      const retries: [number, number][] = [];
      const result = source.pipe(
        retryBackoff({ ...acta, random: () => 0.5, scheduler, onRetry: (_e, n, ms) => retries.push([n, ms]) }),
      );
      const tries = [0];
      for (const ms of [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]) tries.push(tries[tries.length - 1] + 2 + ms);
      expectObservable(result).toBe(`${tries[7] + 2}ms (a|)`);
      flush();
      expect(subscribedAt).toEqual(tries);
      expect(retries).toEqual([
        [1, 1_000],
        [2, 2_000],
        [3, 4_000],
        [4, 8_000],
        [5, 16_000],
        [6, 30_000],
        [7, 30_000],
      ]);
    });
  });

  it('jitters each delay by ±25 %: random 0 gives -25 %, random → 1 gives +25 %, random 0.5 none', () => {
    const at = (random: number) => [1, 2, 3, 6, 10].map((n) => backoffDelay(n, acta, () => random));
    expect(at(0)).toEqual([750, 1_500, 3_000, 22_500, 22_500]);
    expect(at(0.5)).toEqual([1_000, 2_000, 4_000, 30_000, 30_000]);
    expect(at(ALMOST_ONE)).toEqual([1_250, 2_500, 5_000, 37_500, 37_500]);
    // Every random in [0, 1) stays within the bounds.
    for (let r = 0; r < 1; r += 1 / 64) {
      const d = backoffDelay(2, acta, () => r);
      expect(d).toBeGreaterThanOrEqual(1_500);
      expect(d).toBeLessThanOrEqual(2_500);
    }
    expect(backoffDelay(1, { initialMs: 1_000, maxMs: 30_000 }, () => 0)).toBe(1_000); // no jitter configured
  });

  it('waits the jittered delay in virtual time (random 0 and random → 1)', () => {
    for (const [random, first, second] of [
      [0, 750, 1_500],
      [ALMOST_ONE, 1_250, 2_500],
    ]) {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const { source, subscribedAt } = flaky(scheduler, cold, 2);
        source.pipe(retryBackoff({ ...acta, random: () => random, scheduler })).subscribe();
        flush();
        expect(subscribedAt).toEqual([0, 2 + first, 2 + first + 2 + second]);
      });
    }
  });

  it('restarts the count for every subscription', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      let subscriptions = 0;
      const subscribedAt: number[] = [];
      // Fails on the 1st, 2nd, 4th and 5th subscription: each outer subscription fails twice.
      const source = defer(() => {
        subscriptions++;
        subscribedAt.push(scheduler.now());
        return subscriptions % 3 === 0 ? cold('--(a|)') : cold('--#');
      });
      const retries: number[] = [];
      const result = source.pipe(retryBackoff({ ...acta, random: () => 0.5, scheduler, onRetry: (_e, n) => retries.push(n) }));
      expectObservable(result).toBe('3006ms (a|)');
      expectObservable(result, '10000ms ^').toBe('13006ms (a|)');
      flush();
      expect(retries).toEqual([1, 2, 1, 2]);
      expect(subscribedAt).toEqual([0, 1_002, 3_004, 10_000, 11_002, 13_004]);
    });
  });

  it('rethrows at once, without onRetry, when shouldRetry says no', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      const fatal = Object.assign(new Error('syntax'), { code: '42601' });
      const transient = Object.assign(new Error('shutdown'), { code: '57P01' });
      const onRetry = jest.fn();
      const shouldRetry = (e: unknown) => (e as { code?: string }).code === '57P01';

      const refused = cold('--#', undefined, fatal);
      expectObservable(refused.pipe(retryBackoff({ ...acta, shouldRetry, onRetry, scheduler }))).toBe('--#', undefined, fatal);

      // transient first (retried after 1 s), then fatal: rethrown at once.
      let n = 0;
      const mixed = defer(() => (++n === 1 ? cold('--#', undefined, transient) : cold('--#', undefined, fatal)));
      expectObservable(mixed.pipe(retryBackoff({ ...acta, random: () => 0.5, shouldRetry, scheduler }))).toBe('1004ms #', undefined, fatal);
      flush();
      expect(onRetry).not.toHaveBeenCalled();
      expect(n).toBe(2);
    });
  });

  it('calls onRetry before each retry with (err, retry number, delay ms)', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const err = new Error('boom');
      const { source } = flaky(scheduler, cold, 3, err);
      const calls: { args: unknown[]; at: number }[] = [];
      const random = jest.fn().mockReturnValueOnce(0).mockReturnValueOnce(0.5).mockReturnValueOnce(ALMOST_ONE);
      const config: RetryBackoffConfig = { ...acta, random, scheduler, onRetry: (...args) => calls.push({ args, at: scheduler.now() }) };
      source.pipe(retryBackoff(config)).subscribe();
      flush();
      expect(calls).toEqual([
        { args: [err, 1, 750], at: 2 },
        { args: [err, 2, 2_000], at: 754 },
        { args: [err, 3, 5_000], at: 2_756 },
      ]);
    });
  });

  it('retries at once when retryNow$ emits during a delay, and keeps counting; an emission between delays does nothing', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const { source, subscribedAt } = flaky(scheduler, cold, 3);
      // Delays 1 s, 2 s, 4 s; retryNow$ at 1500 (inside the second delay, which began at 1004) and
      // at 1003 (between the first delay's end at 1002 and the next error at 1004: no delay waits).
      const retryNow$ = hot('1003ms n 496ms n');
      const values: string[] = [];
      source.pipe(retryBackoff({ ...acta, random: () => 0.5, scheduler, retryNow$ })).subscribe((v) => values.push(v));
      flush();
      expect(subscribedAt).toEqual([0, 1002, 1500, 5502]);
      expect(values).toEqual(['a']);
    });
  });

  it('passes values and completion through untouched when nothing fails', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable }) => {
      expectObservable(cold('-a-b|').pipe(retryBackoff({ ...acta, scheduler }))).toBe('-a-b|');
      expectObservable(of(1).pipe(retryBackoff({ ...acta, scheduler }))).toBe('(x|)', { x: 1 });
      expectObservable(throwError(() => 'x').pipe(retryBackoff({ ...acta, maxRetries: 0, scheduler }))).toBe('#', undefined, 'x');
    });
  });

  it('uses only the scheduler it is given for its delays (no real timers)', () => {
    const scheduler = new VirtualTimeScheduler(); // not a TestScheduler run: asyncScheduler stays real
    const subscribedAt: number[] = [];
    let n = 0;
    const source = defer(() => {
      subscribedAt.push(scheduler.now());
      return ++n < 3 ? throwError(() => new Error('x')) : of('ok');
    });
    const got: string[] = [];
    source.pipe(retryBackoff({ ...acta, random: () => 0.5, scheduler })).subscribe((v) => got.push(v));
    scheduler.flush();
    expect(got).toEqual(['ok']);
    expect(subscribedAt).toEqual([0, 1_000, 3_000]);
  });
});
