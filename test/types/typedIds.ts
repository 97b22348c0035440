// Compile-time tests, checked by `npm run typecheck` (tsc over test/; jest does not run this file):
// a job's result type flows from its definition through enqueue's id to result, observe and getJob,
// as the JSON form of the handler's result (src/json.ts, Jsonified; docs/reference.md,
// "TypeScript"). Each `@ts-expect-error` line must fail to compile, every other line must
// compile. Nothing here runs: the functions are only type-checked.
import { firstValueFrom } from 'rxjs';
import { type Client, defineJob, type Definition, type EnqueueItem, type EnqueueResult, type JobContext, type JobId, type Jsonified, type ResultOf, type SpawnItem, type TypedJobId } from '../../src';

/** true when A and B are the same type (not merely assignable either way). */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** Compiles only for `true`. */
const same = <T extends true>(_: T): void => undefined;
/** The type `value` has, for same<Equal<...>>. */
declare function typeOf<T>(value: T): T;

// ---- Jsonified: JSON.stringify's rules, as jsonb stores a result -------------------------------
same<Equal<Jsonified<{ at: Date }>, { at: string }>>(true); // toJSON honoured
same<Equal<Jsonified<Date>, string>>(true);
same<Equal<Jsonified<{ toJSON(): { v: number } }>, { v: number }>>(true);
same<Equal<Jsonified<{ a: string; b?: number; c: string | undefined; d: undefined; f: () => void }>, { a: string; b?: number; c?: string }>>(true);
same<Equal<Jsonified<{ readonly list: readonly (Date | undefined)[] }>, { list: (string | null)[] }>>(true); // in an array: null
same<Equal<Jsonified<[Date, number, () => void]>, [string, number, null]>>(true);
same<Equal<Jsonified<void>, null>>(true); // a handler that resolves nothing: stored as null
same<Equal<Jsonified<string | undefined>, string | null>>(true);
same<Equal<Jsonified<'a' | 1 | true | null>, 'a' | 1 | true | null>>(true);
same<Equal<Jsonified<Record<string, Date>>, { [k: string]: string }>>(true);
same<Equal<Jsonified<{ [s: symbol]: number; n: { deep: Date[] } }>, { n: { deep: string[] } }>>(true);
same<Equal<Jsonified<unknown>, unknown>>(true);
same<Equal<Jsonified<any>, any>>(true);
same<Equal<Jsonified<bigint>, never>>(true); // not storable: the job ends Failed
same<Equal<Jsonified<Map<string, number>>, never>>(true);
class Point {
  constructor(
    public x: number,
    public y: number,
  ) {}
  norm(): number {
    return Math.hypot(this.x, this.y);
  }
}
same<Equal<Jsonified<Point>, { x: number; y: number }>>(true); // methods are not own data
interface Tree {
  name: string;
  at: Date;
  children: Tree[];
}
const tree = (t: Jsonified<Tree>): string => t.at + t.children.map((c) => c.children[0]?.at ?? '').join(''); // recursive types
void tree;

// ---- JobId<R> --------------------------------------------------------------------------------
same<Equal<JobId, string>>(true); // the plain id is a string, as before
same<Equal<JobId<unknown>, string>>(true);
same<Equal<JobId<{ n: number }>, TypedJobId<{ n: number }>>>(true); // the name an editor shows
declare const typed: JobId<{ n: number }>;
const asString: string = typed; // a typed id is still a string: every use of a string compiles
const asPlain: JobId = typed;
// @ts-expect-error: a plain string does not carry a result type
const forged: JobId<{ n: number }> = '42';
// @ts-expect-error: nor does an id of another result type
const other: JobId<{ s: string }> = typed;
void [asString, asPlain, forged, other];

const sendMail = defineJob({ name: 'send-mail', handler: async (p: { to: string }) => ({ messageId: `m-${p.to}`, sentAt: new Date(), trace: undefined as string | undefined }) });
const resize = defineJob({ name: 'resize', handler: (p: { width: number }) => [p.width, p.width / 2] as const });
const silent = defineJob({ name: 'silent', handler: async (_p: { n: number }) => {} });
const anyResult: Definition<{ to: string }> = sendMail as Definition<{ to: string }>; // R unknown: as a definition typed without it
type Sent = { messageId: string; sentAt: string; trace?: string };

same<Equal<ResultOf<typeof sendMail>, { messageId: string; sentAt: Date; trace: string | undefined }>>(true);
same<Equal<ResultOf<'send-mail'>, unknown>>(true);

export async function client(client: Client): Promise<void> {
  // ---- enqueue → result: the JSON form of the handler's result, without a type stated --------
  const { id } = await client.enqueue(sendMail, { to: 'a@example.com' });
  same<Equal<typeof id, JobId<{ messageId: string; sentAt: Date; trace: string | undefined }>>>(true);
  const sent = await client.result(id, { timeoutMs: 1_000 });
  same<Equal<typeof sent, Sent>>(true);
  // @ts-expect-error: sentAt comes back as its ISO string, not a Date
  sent.sentAt.getTime();
  // @ts-expect-error: the result has no such member
  void sent.messageID;
  const sentAt: string = sent.sentAt;
  void sentAt;
  // Stating the type still wins, as before (not checked: the caller's word).
  const stated = await client.result<{ messageId: string }>(id);
  same<Equal<typeof stated, { messageId: string }>>(true);
  const statedString = await client.result<string>(id);
  same<Equal<typeof statedString, string>>(true);

  // A handler that resolves nothing: null. A tuple stays a tuple (readonly dropped: JSON.parse's is not).
  const nothing = await client.result((await client.enqueue(silent, { n: 1 })).id);
  same<Equal<typeof nothing, null>>(true);
  const halves = await client.result((await client.enqueue(resize, { width: 640 })).id);
  same<Equal<typeof halves, [number, number]>>(true);

  // ---- by name, by a number or bigint, by a definition without R: unknown, or R as stated ------
  const byName = await client.enqueue('send-mail', { to: 'b@example.com' });
  same<Equal<typeof byName, EnqueueResult>>(true);
  same<Equal<typeof byName.id, string>>(true);
  const unknownResult = await client.result(byName.id);
  same<Equal<typeof unknownResult, unknown>>(true);
  const statedByName = await client.result<Sent>(byName.id);
  same<Equal<typeof statedByName, Sent>>(true);
  const byNumber = await client.result(42);
  same<Equal<typeof byNumber, unknown>>(true);
  const byBigint = await client.result<number>(42n);
  same<Equal<typeof byBigint, number>>(true);
  const untyped = await client.enqueue(anyResult, { to: 'c@example.com' });
  same<Equal<typeof untyped.id, string>>(true);
  const anyTyped = await client.enqueue(sendMail as Definition<any, any>, { to: 'c@example.com' });
  same<Equal<typeof anyTyped.id, string>>(true); // any is not carried: unknown, as a name's
  const withStatedR = await client.enqueue<{ to: string }, { at: Date }>('send-mail', { to: 'd@example.com' }); // by name with R stated: carried
  const statedR = await client.result(withStatedR.id);
  same<Equal<typeof statedR, { at: string }>>(true);

  // The payload is still checked where it was.
  // @ts-expect-error: `to` is a string in sendMail's payload type
  await client.enqueue(sendMail, { to: 1 });

  // ---- observe and getJob: the states' result ----------------------------------------------
  const last = await firstValueFrom(client.observe(id));
  same<Equal<typeof last.result, Sent | null>>(true);
  const job = await client.getJob(id);
  same<Equal<NonNullable<typeof job>['result'], Sent | null>>(true);
  // @ts-expect-error: the stored result's sentAt is a string
  job?.result?.sentAt.toISOString();
  const statedJob = await client.getJob<{ to: string }, Sent>(byName.id);
  same<Equal<NonNullable<typeof statedJob>['result'], Sent | null>>(true);
  const plainState = await firstValueFrom(client.observe(byName.id));
  same<Equal<typeof plainState.result, unknown>>(true);

  // A typed id goes wherever a string or a plain id does.
  await client.cancel(id);
  await client.why(id);
  await client.retryJobs({ ids: [id, byName.id, 7] });
  const ids: string[] = [id, byName.id];
  const byId = new Map<string, number>([[id, 1]]);
  void [ids, byId, `job ${id}`, id.length, id === byName.id];

  // ---- enqueueMany: each id carries its own element's result type --------------------------
  const [mail, sized, named] = await client.enqueueMany([
    { definition: sendMail, payload: { to: 'e@example.com' } },
    { definition: resize, payload: { width: 10 } },
    { definition: 'by-name', payload: 42 },
  ]);
  const mailResult = await client.result(mail.id);
  same<Equal<typeof mailResult, Sent>>(true);
  const sizedResult = await client.result(sized.id);
  same<Equal<typeof sizedResult, [number, number]>>(true);
  same<Equal<typeof named.id, string>>(true);
  const mapped = await client.enqueueMany([1, 2].map((n) => ({ definition: resize, payload: { width: n } })));
  const firstHalves = await client.result(mapped[0].id);
  same<Equal<typeof firstHalves, [number, number]>>(true);
  const all: EnqueueResult[] = mapped; // still assignable to the plain form
  const generic: EnqueueItem[] = [{ definition: sendMail, payload: { to: 'f@example.com' } }];
  const plain = await client.enqueueMany(generic);
  same<Equal<typeof plain, EnqueueResult[]>>(true);
  void all;

  // ---- code of its own that keeps the type: a JobId<R> parameter infers R (the helper states
  // its return type: inside it, JobId<R> of an R not yet known carries nothing) -----------------
  const waitFor = <R>(jobId: JobId<R>): Promise<Jsonified<R>> => client.result(jobId);
  const fromHelper = await waitFor(id);
  same<Equal<typeof fromHelper, Sent>>(true);
  // @ts-expect-error: a plain string is no JobId<R> of a known R
  await waitFor<{ n: number }>('42');
}

// ---- ctx.spawn and ctx.spawnMany: a child's id carries its definition's result type ----------
export async function parent(ctx: JobContext, client: Client): Promise<{ child: JobId<{ messageId: string; sentAt: Date; trace: string | undefined }> }> {
  const child = await ctx.spawn(sendMail, { to: 'g@example.com' }, { onChildFailure: 'fail-parent' });
  const childResult = await client.result(child); // e.g. where the parent's result took the id
  same<Equal<typeof childResult, Sent>>(true);
  const byName = await ctx.spawn('send-mail', { to: 'h@example.com' });
  same<Equal<typeof byName, string>>(true);
  const [a, b, c] = await ctx.spawnMany([
    { definition: sendMail, payload: { to: 'i@example.com' } },
    { definition: resize, payload: { width: 1 }, onChildFailure: 'report' },
    { definition: 'by-name', payload: 1 },
  ]);
  same<Equal<typeof a, typeof child>>(true);
  same<Equal<typeof b, JobId<readonly [number, number]>>>(true);
  same<Equal<typeof c, string>>(true);
  const mapped = await ctx.spawnMany([1, 2].map((width) => ({ definition: resize, payload: { width } })));
  same<Equal<typeof mapped, JobId<readonly [number, number]>[]>>(true);
  const items: readonly SpawnItem[] = [];
  const plain = await ctx.spawnMany(items);
  same<Equal<typeof plain, string[]>>(true);
  const outcomes = await ctx.waitForChildren(); // without ids, outcomes are not typed per child: `result` unknown (test/types/workflows.ts)
  same<Equal<(typeof outcomes)[number]['result'], unknown>>(true);
  const found = outcomes.find((o) => o.id === child); // a typed id compares with a plain one
  void [found, byName];
  return { child }; // stored as its string: Jsonified keeps the brand, so result() of the parent gives a typed id
}
same<Equal<Jsonified<Awaited<ReturnType<typeof parent>>>['child'], JobId<{ messageId: string; sentAt: Date; trace: string | undefined }>>>(true);
