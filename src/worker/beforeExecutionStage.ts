import { type MonoTypeOperatorFunction, Observable, Subject, type Subscription } from 'rxjs';
import { HookFailedError } from '../errors';
import type { Attempt, HookContext, WorkerHooks } from './hooks';
import { attemptOf, entryOfView } from './hookViews';
import type { Entry } from './registry';

/** The beforeExecution stage (WorkerHooks.beforeExecution gives its contract; test/hooks.spec.ts). */
export function beforeExecutionStage(hook: NonNullable<WorkerHooks['beforeExecution']>, context: HookContext): MonoTypeOperatorFunction<Entry> {
  const { config, deps, tools, handBacks, giveBack } = context;
  const { scheduler, holdLimitMs, logger } = config;
  return (source) =>
    new Observable<Entry>((subscriber) => {
      /** What the hook holds, oldest first, with the scheduler time it came in. */
      const held = new Map<Entry, number>();
      const attempts = new Subject<Attempt>();
      let ended = false;
      let sourceDone = false;
      let warnedForeign = false;
      let timer: Subscription | null = null;
      let sourceSub: Subscription | undefined;
      let hookSub: Subscription | undefined;

      /** Each held entry's abort callback (Entry.onAbort), while the hook holds it. */
      const aborts = new Map<Entry, () => void>();
      /** Takes `entry` out of what the hook holds, with its hand-back and abort callbacks. */
      const takeOut = (entry: Entry) => {
        held.delete(entry);
        handBacks.delete(entry);
        const onAbort = aborts.get(entry);
        aborts.delete(entry);
        if (onAbort !== undefined && entry.onAbort === onAbort) entry.onAbort = undefined;
      };
      /** On to the executors; one handed back by a stop meanwhile (shutdown.ts) does not run: its permit comes back here. */
      const pass = (entry: Entry) => {
        if (entry.state === 'finalizing') deps.release();
        else subscriber.next(entry);
      };
      /** Takes `entry` out of the hook: handed back, its permit returned. */
      const letGo = (entry: Entry, reason: string, level: 'debug' | 'warn' | 'error') => {
        takeOut(entry);
        giveBack(entry, reason, level);
        deps.release();
      };
      /** One timer, for the oldest held attempt's hold limit (a Map iterates in insertion order). */
      const arm = () => {
        if (timer !== null || ended) return;
        const oldest = held.values().next();
        if (oldest.done) return;
        timer = scheduler.schedule(
          () => {
            timer = null;
            const now = scheduler.now();
            for (const [entry, since] of held) {
              if (now - since < holdLimitMs) break;
              letGo(entry, `held by beforeExecution for ${holdLimitMs} ms (dropped, or delayed past an attempt deadline)`, 'warn');
            }
            arm();
          },
          Math.max(0, oldest.value + holdLimitMs - scheduler.now()),
        );
      };
      const end = (failure?: HookFailedError) => {
        if (ended) return;
        ended = true;
        timer?.unsubscribe();
        sourceSub?.unsubscribe();
        hookSub?.unsubscribe();
        const reason = failure ? failure.message : 'the worker stopped claiming';
        for (const entry of [...held.keys()]) {
          if (!failure) entry.abort('shutdown'); // as shutdown.ts does to every unstarted attempt
          letGo(entry, reason, failure ? 'error' : 'debug');
        }
        if (failure) {
          logger.error({ err: failure.cause ?? failure }, failure.message);
          config.onFailure(failure);
        }
        subscriber.complete();
      };

      try {
        hookSub = hook(attempts.asObservable(), tools).subscribe({
          next: (attempt) => {
            const entry = entryOfView.get(attempt);
            if (entry === undefined) {
              if (!warnedForeign) logger.warn('beforeExecution emitted a value that is not an attempt it was given: ignored (emit the Attempt objects themselves)');
              warnedForeign = true;
              return;
            }
            if (!held.has(entry)) return; // handed back already, or emitted twice
            takeOut(entry);
            pass(entry);
          },
          error: (err: unknown) => end(new HookFailedError('beforeExecution', 'errored', { cause: err })),
          complete: () => end(sourceDone ? undefined : new HookFailedError('beforeExecution', 'completed while the worker was claiming')),
        });
      } catch (err) {
        end(new HookFailedError('beforeExecution', 'threw when called', { cause: err }));
      }
      if (ended) return undefined;
      sourceSub = source.subscribe({
        next: (entry) => {
          held.set(entry, scheduler.now());
          handBacks.set(entry, (reason) => held.has(entry) && letGo(entry, reason, 'debug'));
          // Aborted while held (a client's cancel, a lost lease, its deadline): its outcome is
          // decided, so it leaves the hook at once and the run makes that completion without
          // calling the handler (executor.ts), as aroundHandler's does, instead of waiting out
          // the hook's delay with its permit (test/hooks.spec.ts, "an attempt cancelled while held").
          const onAbort = () => {
            if (ended || !held.has(entry)) return;
            takeOut(entry);
            pass(entry);
          };
          aborts.set(entry, onAbort);
          entry.onAbort = onAbort;
          attempts.next(attemptOf(entry));
          arm();
        },
        error: (err: unknown) => {
          ended = true;
          hookSub?.unsubscribe();
          subscriber.error(err);
        },
        // Claiming stopped: what the hook holds goes back at once (shutdown.ts: unstarted rows are handed back).
        complete: () => {
          sourceDone = true;
          end();
        },
      });
      return () => {
        // Unsubscribed (the worker's teardown): the worker's stop or fatal path answers for the rows.
        ended = true;
        timer?.unsubscribe();
        sourceSub?.unsubscribe();
        hookSub?.unsubscribe();
        for (const entry of [...held.keys()]) takeOut(entry);
      };
    });
}
