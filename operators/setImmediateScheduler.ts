import { asyncScheduler, type SchedulerAction, type SchedulerLike, Subscription } from 'rxjs';

/**
 * A SchedulerLike whose 0 ms actions run in the next check phase of Node's event loop
 * (`setImmediate`): after every pending microtask and every I/O callback already due, and
 * without the ≥ 1 ms clamp of `setTimeout(0)` that `asyncScheduler` has. Actions with a delay
 * go to `asyncScheduler`; `now()` is monotonic (`performance.now()`). Use it for "one tick later" in real time; in tests pass a
 * TestScheduler instead.
 *
 * ```
 * frame:    microtasks … I/O callbacks … | check phase: action runs
 * ```
 */
export const setImmediateScheduler: SchedulerLike = {
  now: () => performance.now(), // monotonic, as monotonicScheduler's (whose ticks this scheduler runs in the claimer)
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    if (delay > 0) return asyncScheduler.schedule(work, delay, state);
    const action = new Subscription() as SchedulerAction<T>;
    action.schedule = (nextState?: T, nextDelay = 0) => {
      const next = setImmediateScheduler.schedule(work, nextDelay, nextState);
      action.add(next);
      return action;
    };
    const handle = setImmediate(() => {
      if (!action.closed) work.call(action, state);
    });
    action.add(() => clearImmediate(handle));
    return action;
  },
};
