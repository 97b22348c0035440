import { Observable, type Subscriber, type Subscription } from 'rxjs';
import type { Completion } from './executor';
import type { AttemptCompletion, HookContext, WorkerHooks } from './hooks';
import { attemptOf, completionOf, viewOfCompletion } from './hookViews';
import type { Entry } from './registry';

/** The aroundHandler stage (WorkerHooks.aroundHandler gives its contract; test/hooks.spec.ts). */
export function aroundHandlerStage(hook: NonNullable<WorkerHooks['aroundHandler']>, context: HookContext): (entry: Entry) => Observable<Completion> {
  const { config, deps, tools, handBacks, heldCompletions, giveBack } = context;
  const { scheduler, holdLimitMs, logger } = config;
  return (entry) =>
    new Observable<Completion>((subscriber) => {
      // Held by an executor from here: a stop aborts it (below) instead of handing it back itself.
      entry.taken = true;
      const attempt = attemptOf(entry);
      /** Subscribers of `run` waiting for the completion. */
      const watchers = new Set<Subscriber<AttemptCompletion>>();
      let runSub: Subscription | undefined;
      let hookSub: Subscription | undefined;
      let timer: Subscription | null = null;
      /** The hold limit of a run not started yet: the hook neither started nor ended it (NEVER, a filter's mistake). */
      let startLimit: Subscription | undefined;
      let completion: Completion | undefined;
      let runEnded = false;
      let hookEnded = false;
      /**
       * The hook's silence is not a swallow: we cut it off (an abort before the run started), or
       * its error was logged already (one error per attempt: test/hooks.spec.ts, "a hook that
       * errors after starting the run").
       */
      let excused = false;
      let handedBack = false;
      let passed = false;
      let finished = false;
      /** The run's completion is being handed to every subscriber of `run`: the attempt ends after. */
      let delivering = false;

      const finish = () => {
        if (finished) return;
        finished = true;
        heldCompletions.delete(release);
        subscriber.complete();
      };
      /** The shutdown timeout passed while the hook holds the completion: it goes on now. */
      const release = () => settle();
      const pass = () => {
        if (passed || completion === undefined) return;
        passed = true;
        subscriber.next(completion);
      };
      /** The run has ended: the completion goes on once the hook passed it or ended (or the hold limit passed). */
      const settle = () => {
        if (finished || !runEnded || delivering) return;
        if (completion === undefined || passed) return finish();
        if (!hookEnded && !context.releasing) {
          timer ??= scheduler.schedule(() => {
            logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion?.row.outcome, holdLimitMs }, 'aroundHandler held the completion too long: written as it ended');
            pass();
            finish();
          }, holdLimitMs);
          heldCompletions.add(release);
          return;
        }
        if (!hookEnded) {
          // A stop's shutdown timeout passed (test/testing/virtualWorker.spec.ts, "a completion aroundHandler holds at a stop").
          logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion.row.outcome }, 'aroundHandler held the completion past the shutdown timeout: written as it ended');
          excused = true;
          hookEnded = true;
          hookSub?.unsubscribe();
        }
        if (!excused) logger.error({ jobId: entry.row.id, execution: entry.row.execution, outcome: completion.row.outcome }, 'aroundHandler swallowed the completion: written as it ended');
        pass();
        finish();
      };
      const startRun = () => {
        if (runSub !== undefined || handedBack) return;
        startLimit?.unsubscribe();
        handBacks.delete(entry);
        if (entry.onAbort === onAbort) entry.onAbort = undefined;
        runSub = deps.run(entry).subscribe({
          next: (c) => {
            completion = c;
          },
          error: (err: unknown) => subscriber.error(err),
          complete: () => {
            runEnded = true;
            const view = completion && completionOf(completion);
            delivering = true;
            for (const watcher of [...watchers]) {
              if (view) watcher.next(view);
              watcher.complete();
            }
            delivering = false;
            settle();
          },
        });
      };
      const handBack = (reason: string, level: 'debug' | 'warn') => {
        if (runSub !== undefined || handedBack) return;
        handedBack = true;
        handBacks.delete(entry);
        if (entry.onAbort === onAbort) entry.onAbort = undefined;
        giveBack(entry, reason, level);
        finish();
      };
      /** Aborted before its run started (a stop, a deadline, a lost lease): the run decides, without the hook (executor.ts: it runs no handler for an aborted entry). */
      const onAbort = () => {
        if (runSub !== undefined || handedBack || finished) return;
        excused = true;
        hookEnded = true;
        hookSub?.unsubscribe();
        startRun();
      };
      entry.onAbort = onAbort;
      handBacks.set(entry, (reason) => handBack(reason, 'debug'));

      const run = new Observable<AttemptCompletion>((watcher) => {
        if (handedBack || finished) return watcher.complete();
        if (runEnded) {
          if (completion) watcher.next(completionOf(completion));
          return watcher.complete();
        }
        watchers.add(watcher);
        startRun();
        return () => watchers.delete(watcher);
      });
      const hookFailed = (err: unknown, what: string) => {
        logger.error({ err, jobId: entry.row.id, execution: entry.row.execution }, `aroundHandler ${what}${runSub ? ': the run goes on and is written as it ends' : ': the attempt runs without it'}`);
        excused = true;
        hookEnded = true;
        if (runSub === undefined) startRun();
        else settle();
      };
      try {
        hookSub = hook(attempt, run, tools).subscribe({
          next: (value) => {
            if (completion !== undefined && value === viewOfCompletion.get(completion)) {
              pass();
              settle();
            }
          },
          error: (err: unknown) => hookFailed(err, 'errored'),
          complete: () => {
            hookEnded = true;
            if (runSub === undefined) handBack('aroundHandler ended without running the attempt', 'warn');
            else settle();
          },
        });
      } catch (err) {
        hookFailed(err, 'threw when called');
      }
      if (finished) hookSub?.unsubscribe();
      // As beforeExecution's hold limit: a run not started within it cannot be told from one never
      // to start, and would keep its permit for good (test/hooks.spec.ts, "neither starts nor ends (NEVER)").
      else if (runSub === undefined && !handedBack) {
        startLimit = scheduler.schedule(() => handBack(`aroundHandler did not start the run within ${holdLimitMs} ms (never started, or delayed past an attempt deadline)`, 'warn'), holdLimitMs);
      }
      return () => {
        finished = true;
        startLimit?.unsubscribe();
        heldCompletions.delete(release);
        hookSub?.unsubscribe();
        runSub?.unsubscribe();
        timer?.unsubscribe();
        handBacks.delete(entry);
        if (entry.onAbort === onAbort) entry.onAbort = undefined;
        deps.release();
      };
    });
}
