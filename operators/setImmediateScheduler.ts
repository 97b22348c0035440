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
 *
 * An action that reschedules itself (`this.schedule(state, delay)`, as `interval` and `repeat`
 * do) stays one action holding one pending run, as rxjs's own actions do: the last call wins, and
 * nothing accumulates however long it loops (test/operators/setImmediateScheduler.spec.ts,
 * "a 0 ms interval").
 */
export const setImmediateScheduler: SchedulerLike = {
  now: () => performance.now(), // monotonic, as monotonicScheduler's (whose ticks this scheduler runs in the claimer)
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    const action = new Subscription() as SchedulerAction<T>;
    /** The one pending run of this action, if any. */
    let pending: Subscription | null = null;
    const plan = (nextState: T | undefined, nextDelay: number) => {
      if (pending) {
        action.remove(pending);
        pending.unsubscribe();
      }
      const run = () => {
        if (pending) action.remove(pending);
        pending = null;
        if (!action.closed) work.call(action, nextState);
      };
      if (nextDelay > 0) {
        pending = asyncScheduler.schedule(run, nextDelay);
      } else {
        const handle = setImmediate(run);
        pending = new Subscription(() => clearImmediate(handle));
      }
      action.add(pending);
    };
    action.schedule = (nextState?: T, nextDelay = 0) => {
      if (!action.closed) plan(nextState, nextDelay);
      return action;
    };
    plan(state, delay);
    return action;
  },
};
