import { asyncScheduler, type SchedulerAction, type SchedulerLike, type Subscription } from 'rxjs';

/**
 * `asyncScheduler`'s timers with a monotonic clock: `now()` is `performance.now()` (ms since the
 * process started; it never steps), not `Date.now()`. Node's timers already run on a monotonic
 * clock, so with this scheduler every duration measured through `now()` (attempt deadlines,
 * timeouts, retry windows) ignores wall-clock steps: NTP corrections, `date -s`, a VM resumed
 * from a snapshot. Its `now()` is not a date: compare it only with itself.
 */
export const monotonicScheduler: SchedulerLike = {
  now: () => performance.now(),
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay?: number, state?: T): Subscription {
    return asyncScheduler.schedule(work, delay, state);
  },
};
