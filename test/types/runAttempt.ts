// Compile-time tests, checked by `npm run typecheck` (tsc over test/; jest does not run this file):
// acta/testing's runAttempt types a run's result as the JSON form of the handler's result
// (Jsonified<R>, src/json.ts), as client.result does: it comes back through JSON, so a Date is a
// string at runtime (docs/reference.md, "acta/testing"). Each `@ts-expect-error` line must fail to
// compile, every other line must compile. Nothing here runs.
import { defineJob, type Jsonified } from '../../src';
import { type AttemptRun, runAttempt } from '../../src/testing';

/** true when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const same = <T extends true>(_: T): void => undefined;

const stamped = defineJob({ name: 'stamped', handler: async (p: { n: number }) => ({ n: p.n, at: new Date(), skip: undefined as string | undefined }) });
const nothing = defineJob({ name: 'nothing', handler: async (_: { n: number }) => undefined });

export async function check(): Promise<void> {
  const run = await runAttempt(stamped, { n: 1 });
  same<Equal<typeof run.result, { n: number; at: string; skip?: string } | null>>(true);
  same<Equal<typeof run, AttemptRun<{ n: number; at: Date; skip: string | undefined }>>>(true);
  same<Equal<AttemptRun<Date>['result'], string | null>>(true);
  same<Equal<AttemptRun['result'], unknown>>(true); // unknown | null is unknown
  if (run.result !== null) {
    const at: string = run.result.at; // the ISO string it is at runtime
    void at;
    // @ts-expect-error: not a Date once stored
    run.result.at.getTime();
  }
  const none = await runAttempt(nothing, { n: 1 });
  same<Equal<typeof none.result, null>>(true); // a handler that resolves nothing: stored as null
  same<Equal<typeof none.result, Jsonified<undefined> | null>>(true);
}
