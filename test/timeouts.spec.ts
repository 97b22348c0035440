import { asyncScheduler, type SchedulerLike } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { Timeouts } from '../src/worker/timeouts';

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

/** `scheduler`, counting the actions scheduled on it. */
function counting(scheduler: SchedulerLike) {
  const counter = {
    scheduled: 0,
    scheduler: {
      now: () => scheduler.now(),
      schedule: ((work: () => void, delay?: number) => {
        counter.scheduled++;
        return scheduler.schedule(work, delay);
      }) as SchedulerLike['schedule'],
    },
  };
  return counter;
}

describe('Timeouts', () => {
  it('fires each timeout exactly ms after its start, in order, per duration; a cancelled one never fires', () => {
    const scheduler = newScheduler();
    scheduler.run(({ flush }) => {
      const timeouts = new Timeouts(scheduler);
      const fired: [string, number][] = [];
      const start = (name: string, at: number, ms: number, cancelAt?: number) =>
        scheduler.schedule(() => {
          const t = timeouts.start(ms, () => fired.push([name, scheduler.now()]));
          if (cancelAt !== undefined) scheduler.schedule(() => t.cancel(), cancelAt - at);
        }, at);
      start('a', 0, 10);
      start('b', 2, 10, 5); // cancelled before it is due
      start('c', 3, 10);
      start('x', 1, 4); // another duration, earlier
      start('d', 4, 10, 13); // due at 14, cancelled at 13 (after c fired)
      start('e', 20, 10, 40); // cancelled after it fired: nothing happens
      flush();
      expect(fired).toEqual([
        ['x', 5],
        ['a', 10],
        ['c', 13],
        ['e', 30],
      ]);
      expect(timeouts.pending).toBe(0);
    });
  });

  it('schedules one action per duration while attempts come and go, not one per attempt', () => {
    const scheduler = newScheduler();
    scheduler.run(({ flush }) => {
      const counter = counting(scheduler);
      const timeouts = new Timeouts(counter.scheduler);
      let fired = 0;
      // A drain: 5,000 attempts of 1 ms each, 128 at a time, under a 300 s timeout; the next batch
      // starts as the previous one ends, so the queue of that duration is never empty in between.
      for (let i = 0; i < 5_000; i++) {
        scheduler.schedule(() => {
          const t = timeouts.start(300_000, () => fired++);
          scheduler.schedule(() => t.cancel(), 1);
        }, Math.floor(i / 128));
      }
      flush();
      expect(fired).toBe(0);
      expect(timeouts.pending).toBe(0);
      expect(counter.scheduled).toBe(1); // a timer per attempt would be 5,000
    });
  });

  it('keeps memory O(pending) behind a long attempt at the front', () => {
    const scheduler = newScheduler();
    scheduler.run(() => {
      const timeouts = new Timeouts(scheduler);
      timeouts.start(300_000, () => undefined); // never ends
      for (let i = 0; i < 50_000; i++) timeouts.start(300_000, () => undefined).cancel();
      expect(timeouts.pending).toBe(1);
      expect(timeouts.retained).toBeLessThan(2 * 1 + 1024 + 2);
    });
  });

  it('leaves no timer behind in real time once nothing is pending', () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const timeouts = new Timeouts(asyncScheduler);
    const a = timeouts.start(60_000, () => undefined);
    const b = timeouts.start(30_000, () => undefined);
    expect(timers()).toBe(before + 2);
    a.cancel();
    b.cancel();
    expect(timers()).toBe(before);
  });
});
