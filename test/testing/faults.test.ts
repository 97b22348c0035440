// acta/testing's injectFaults on the real engine (a PostgreSQL server; the same wrapper works on
// PGlite and on memoryLedger): completion writes that fail for a while, a lost lease, a crash right
// after a step, an attempt delivered twice. Each checked from the attempt ledger, written the way a
// user would, through the public exports.
import { createClient, createWorker, type Db, defineJob, type JobContext, type Worker } from '../../src';
import { injectFaults, sqlLedger } from '../../src/testing';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
const H = 200; // lease 800 ms, recovery every 800 ms: a lost attempt comes back within about 1.6 s

const running: Worker[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((w) => w.stop()));
});

let seq = 0;
async function setUp(handler: (payload: { n: number }, ctx: JobContext) => unknown) {
  const namespace = `faults-${++seq}`;
  const job = defineJob({ name: 'job', handler });
  const faults = injectFaults(sqlLedger(db as Db));
  const worker = createWorker({ ledger: faults.ledger, namespace, definitions: [job], heartbeatIntervalMs: H, executors: 2, logger: silentLogger });
  running.push(worker);
  await worker.start();
  const client = createClient({ force: true, db, namespace });
  return { faults, worker, client, job };
}
// acta.all_executions: a succeeded job moved to acta.succeeded_jobs has no acta.executions row for
// its last attempt; the view gives that attempt's 'succeeded' row from its succeeded_jobs row.
const ledgerOf = async (id: string) =>
  (await db.query<{ execution: number; outcome: string; charged: boolean }>('select execution, outcome, charged from acta.all_executions where job_id = $1 order by execution', [id])).rows;
const succeeded = (client: ReturnType<typeof createClient>, id: string) => waitFor(async () => (await client.getJob(id))?.status === 'succeeded', `job ${id} to succeed`, 20_000);

test('completion writes that fail for a while: the write is repeated until it lands, and the job ran once', async () => {
  let runs = 0;
  const { faults, client } = await setUp(() => void runs++);
  faults.fail('completeExecutions', { forMs: 1_500 });
  const { id } = await client.enqueue('job', { n: 1 });
  await succeeded(client, id);
  expect(runs).toBe(1);
  expect(await ledgerOf(id)).toEqual([{ execution: 1, outcome: 'succeeded', charged: true }]);
});

test("a lost lease: the handler's signal aborts ('lost'), its late completion is fenced out, and recovery returns the row to run again", async () => {
  const reasons: unknown[] = [];
  let first = true;
  const { faults, client } = await setUp((_p, ctx) => {
    if (!first) return 'second';
    first = false;
    return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => (reasons.push(ctx.signal.reason), reject(new Error('aborted')))));
  });
  const { id } = await client.enqueue('job', { n: 1 });
  await waitFor(() => !first, 'the first attempt to start');
  await new Promise((r) => setTimeout(r, 2 * H)); // a beat has told the ledger the handler started
  faults.loseLease(id);
  await succeeded(client, id);
  expect(reasons).toEqual(['lost']);
  // The first attempt ended by recovery (its handler had started: charged), the second succeeded.
  expect(await ledgerOf(id)).toEqual([
    { execution: 1, outcome: 'lost', charged: true },
    { execution: 2, outcome: 'succeeded', charged: true },
  ]);
});

test('a crash right after a step: the next attempt gets the recorded step back without running it again', async () => {
  const effects: string[] = [];
  const { faults, client } = await setUp(async (_p, ctx) => {
    const charge = await ctx.step('charge', () => (effects.push(`charge:${ctx.execution}`), { id: 'ch_1' }));
    await ctx.step('email', () => effects.push(`email:${ctx.execution}`));
    return charge;
  });
  faults.crashAfterStep('charge');
  const { id } = await client.enqueue('job', { n: 1 });
  await succeeded(client, id);
  expect(effects).toEqual(['charge:1', 'email:2']);
  expect((await client.getJob(id))?.result).toEqual({ id: 'ch_1' });
  expect((await ledgerOf(id)).map((e) => e.outcome)).toEqual(['lost', 'succeeded']);
});

test('an attempt delivered twice: two handlers run the job at once, and only the second one\'s completion counts', async () => {
  let concurrent = 0;
  let most = 0;
  const { faults, client } = await setUp(async (_p, ctx) => {
    concurrent++;
    most = Math.max(most, concurrent);
    // The first attempt runs until the second one has started.
    if (ctx.execution === 1) await waitFor(() => most === 2, 'the second delivery', 20_000, 10);
    concurrent--;
    return ctx.execution;
  });
  const { id } = await client.enqueue('job', { n: 1 });
  faults.deliverTwice(id);
  await succeeded(client, id);
  // The first attempt's write did not land: fenced out, or (claimed again by this same worker)
  // superseded and never written.
  expect(most).toBe(2);
  expect((await client.getJob(id))?.result).toBe(2);
  expect((await ledgerOf(id)).map((e) => e.outcome)).toEqual(['lost_uncharged', 'succeeded']);
});
