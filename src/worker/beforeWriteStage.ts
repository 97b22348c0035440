import { type MonoTypeOperatorFunction, Observable, Subject, type Subscription } from 'rxjs';
import type { Completion } from './executor';
import type { AttemptCompletion, HookContext, WorkerHooks } from './hooks';
import { completionOf } from './hookViews';

/** The beforeWrite stage (WorkerHooks.beforeWrite gives its contract; test/hooks.spec.ts). */
export function beforeWriteStage(hook: NonNullable<WorkerHooks['beforeWrite']>, context: HookContext): MonoTypeOperatorFunction<Completion> {
  const { tools } = context;
  const { logger } = context.config;
  return (source) =>
    new Observable<Completion>((subscriber) => {
      const completions = new Subject<AttemptCompletion>();
      let attached = true;
      const detach = (err: unknown) => {
        if (!attached) return;
        attached = false;
        logger.error({ err }, 'beforeWrite failed: detached (completions are written as before)');
      };
      let hookSub: Subscription | undefined;
      try {
        hookSub = hook(completions.asObservable(), tools).subscribe({ error: detach, complete: () => (attached = false) });
      } catch (err) {
        detach(err);
      }
      const sourceSub = source.subscribe({
        next: (completion) => {
          if (attached) {
            try {
              completions.next(completionOf(completion));
            } catch (err) {
              detach(err);
            }
          }
          subscriber.next(completion);
        },
        error: (err: unknown) => subscriber.error(err),
        complete: () => {
          completions.complete();
          subscriber.complete();
        },
      });
      return () => {
        sourceSub.unsubscribe();
        hookSub?.unsubscribe();
      };
    });
}
