// Compile-time tests, checked by `npm run typecheck` (tsc over test/; jest does not run this file):
// ctx.spawn and ctx.spawnMany check a child's payload against its definition as client.enqueue and
// enqueueMany do (PayloadOf, ItemOf), and ctx.waitForChildren(ids) types each outcome by its id
// (ChildOutcome<R>: `result` as the JSON form of the child's result; docs/workflows.md). Each
// `@ts-expect-error` line must fail to compile, every other line must compile. Nothing here runs.
import { type ChildOutcome, defineJob, type Definition, type JobContext, type JobId, type SpawnItem } from '../../src';

/** true when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const same = <T extends true>(_: T): void => undefined;

const sendMail = defineJob({ name: 'send-mail', handler: async (p: { to: string }) => ({ messageId: `m-${p.to}`, sentAt: new Date() }) });
const resize = defineJob({ name: 'resize', handler: (p: { width: number }) => p.width / 2 });
type Sent = { messageId: string; sentAt: string };

export async function spawnPayloads(ctx: JobContext): Promise<void> {
  // ---- spawn: the payload is its definition's, as enqueue's -----------------------------------
  await ctx.spawn(sendMail, { to: 'a@example.com' }, { priority: 1 });
  // @ts-expect-error: `to` is a string in sendMail's payload type
  await ctx.spawn(sendMail, { to: 1 });
  // @ts-expect-error: `to` is missing
  await ctx.spawn(sendMail, {});
  // @ts-expect-error: a payload of another definition
  await ctx.spawn(sendMail, { width: 1 });
  await ctx.spawn('send-mail', { anything: true }); // by name: not checked
  await ctx.spawn<{ to: string }>('send-mail', { to: 'b@example.com' }); // by name with P stated: checked
  // @ts-expect-error: against the stated P
  await ctx.spawn<{ to: string }>('send-mail', { to: 2 });
  // @ts-expect-error: a definition is a name or defineJob's object, not any object with a name
  await ctx.spawn({ name: 'send-mail' }, { to: 'c@example.com' });
  await ctx.spawn(sendMail as Definition<any, any>, { whatever: 1 }); // an untyped definition: not checked

  // ---- spawnMany: each item against its own definition, as enqueueMany's ------------------------
  await ctx.spawnMany([
    { definition: sendMail, payload: { to: 'd@example.com' } },
    { definition: resize, payload: { width: 640 }, onChildFailure: 'fail-parent' },
    { definition: 'by-name', payload: 1 },
  ]);
  await ctx.spawnMany([
    { definition: sendMail, payload: { to: 'e@example.com' } },
    // @ts-expect-error: resize's payload has a width, not a `to`
    { definition: resize, payload: { to: 'f@example.com' } },
  ]);
  // @ts-expect-error: built by map: against the definition of its elements
  await ctx.spawnMany([1, 2].map((width) => ({ definition: resize, payload: { width: String(width) } })));
  const items: SpawnItem[] = [{ definition: sendMail, payload: { anything: 1 } }]; // typed so: not checked, plain ids
  const plain = await ctx.spawnMany(items);
  same<Equal<typeof plain, string[]>>(true);
}

export async function outcomes(ctx: JobContext): Promise<void> {
  const mail = await ctx.spawn(sendMail, { to: 'g@example.com' });
  const half = await ctx.spawn(resize, { width: 10 });
  const named = await ctx.spawn('by-name', 1);

  // ---- the ids given: one outcome per id, in their order, each typed by its id -----------------
  const [m, h, n] = await ctx.waitForChildren([mail, half, named]);
  same<Equal<typeof m, ChildOutcome<{ messageId: string; sentAt: Date }>>>(true);
  same<Equal<typeof h, ChildOutcome<number>>>(true);
  same<Equal<typeof n, ChildOutcome>>(true);
  if (m.status === 'succeeded') {
    same<Equal<typeof m.result, Sent>>(true); // the JSON form: sentAt is its ISO string
    // @ts-expect-error: not a Date once stored
    m.result.sentAt.getTime();
    same<Equal<typeof m.id, JobId<{ messageId: string; sentAt: Date }>>>(true);
  } else {
    same<Equal<typeof m.result, undefined>>(true); // no result unless it succeeded
    same<Equal<typeof m.status, 'ready' | 'executing' | 'waiting' | 'failed' | 'cancelled' | 'deleted'>>(true);
    void m.error?.message;
  }
  same<Equal<typeof n.result, unknown>>(true);
  // spawnMany's array as it is: an array of the one definition's outcomes.
  const ids = await ctx.spawnMany([1, 2].map((width) => ({ definition: resize, payload: { width } })));
  const all = await ctx.waitForChildren(ids);
  same<Equal<typeof all, ChildOutcome<number>[]>>(true);
  const halves: (number | undefined)[] = all.map((o) => o.result);
  void halves;
  // @ts-expect-error: ids are strings (JobId), not numbers
  await ctx.waitForChildren([1]);

  // ---- no ids: every child so far, `result` unknown unless R is stated (the caller's word) -----
  const every = await ctx.waitForChildren();
  same<Equal<typeof every, ChildOutcome[]>>(true);
  same<Equal<(typeof every)[number]['result'], unknown>>(true);
  const stated = await ctx.waitForChildren<number>();
  same<Equal<typeof stated, ChildOutcome<number>[]>>(true);
  // A typed outcome is still an outcome (ChildFailedError's `child`, code of one's own).
  const plain: ChildOutcome[] = all;
  void plain;
}
