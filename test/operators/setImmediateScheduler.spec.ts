import * as fs from 'node:fs';
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
