import * as fs from 'node:fs';
import { interval, type Subscription } from 'rxjs';
import { setImmediateScheduler } from '../../operators';

// Real time on purpose: this scheduler exists to run in Node's check phase. The assertions are
// about order, never about how long anything took.

test('a 0 ms action runs after pending microtasks and before a 0 ms timer', async () => {
  const order: string[] = [];
  // Scheduled from an I/O callback, where Node guarantees the check phase comes before timers.
  await new Promise<void>((resolve) => {
    fs.stat(__filename, () => {
      setTimeout(() => {
        order.push('timeout');
        resolve();
      }, 0);
      setImmediateScheduler.schedule(() => order.push('immediate'));
      void Promise.resolve().then(() => order.push('microtask'));
    });
  });
  expect(order).toEqual(['microtask', 'immediate', 'timeout']);
});

test('an unsubscribed action never runs', async () => {
  let ran = false;
  setImmediateScheduler.schedule(() => (ran = true)).unsubscribe();
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  expect(ran).toBe(false);
});

test('a delayed action goes through the async scheduler and can be cancelled', async () => {
  const ran: number[] = [];
  setImmediateScheduler.schedule(() => ran.push(1), 5);
  setImmediateScheduler.schedule(() => ran.push(2), 5).unsubscribe();
  await new Promise((r) => setTimeout(r, 30));
  expect(ran).toEqual([1]);
});

test('an action can reschedule itself with this.schedule', async () => {
  const seen: number[] = [];
  await new Promise<void>((resolve) => {
    setImmediateScheduler.schedule<number>(function (n = 0) {
      seen.push(n);
      if (n < 2) this.schedule(n + 1);
      else resolve();
    }, 0, 0);
  });
  expect(seen).toEqual([0, 1, 2]);
});

test('a 0 ms interval: 50,000 ticks keep one pending run, and unsubscribing ends the loop at once', async () => {
  // Was: each this.schedule made a new action owned by the one before, a chain as long as the
  // loop (about 0.6 KB a tick: 173 MB after 300,000 ticks), whose unsubscription overflowed the
  // stack ("Maximum call stack size exceeded" in an UnsubscriptionError).
  let ticks = 0;
  const subscription = await new Promise<Subscription>((resolve) => {
    const sub: Subscription = interval(0, setImmediateScheduler).subscribe(() => {
      if (++ticks === 50_000) resolve(sub);
    });
  });
  expect(() => subscription.unsubscribe()).not.toThrow();
  await new Promise((r) => setImmediate(r));
  await new Promise((r) => setTimeout(r, 5));
  expect(ticks).toBe(50_000);
});

test('an action rescheduled with a delay runs on the async scheduler as the same action, and the last schedule call wins', async () => {
  const runs: { n: number; at: number; self: unknown }[] = [];
  const start = performance.now();
  setImmediateScheduler.schedule<number>(function (n = 0) {
    runs.push({ n, at: performance.now() - start, self: this });
    if (n === 0) {
      this.schedule(100, 0); // replaced by the next call: never runs
      this.schedule(1, 20);
    } else if (n === 1) this.schedule(2, 0);
  }, 0, 0);
  await new Promise((r) => setTimeout(r, 100));
  expect(runs.map((r) => r.n)).toEqual([0, 1, 2]);
  expect(new Set(runs.map((r) => r.self)).size).toBe(1); // one action throughout
  expect(runs[1].at).toBeGreaterThanOrEqual(19); // timers may fire up to 1 ms early (Node rounds)
});
