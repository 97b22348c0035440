// A manual retry (client.retryJobs) and the recorded waits that depend on what it retried
// (docs/workflows.md, "Child jobs" and "Signals"): a retried child is waited for again by a parent
// whose children-wait answer was recorded but not yet replayed; a retried job whose signal wait timed
// out waits again, a signal it received stays. Each state is arranged with no worker running the
// job that must not move, then a worker is started.
import { createClient, createWorker, defineJob, type Worker } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
const status = async (id: string) => (await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0]?.status;
const stepNames = async (id: string) => (await db.query<{ name: string }>('select name from acta.steps where job_id = $1 order by name', [id])).rows.map((r) => r.name);

/** Runs `definitions` in a worker until `done` holds, then stops it. */
async function runUntil(definitions: Parameters<typeof createWorker>[0]['definitions'], done: () => Promise<boolean>, what: string): Promise<void> {
  const worker: Worker = createWorker({ db, definitions, logger: silentLogger, heartbeatIntervalMs: 100, executors: 2 });
  await worker.start();
  try {
    await waitFor(done, what);
  } finally {
    await worker.stop();
  }
}

describe('a retried child', () => {
  const child = defineJob({
    name: 'rw-child',
    maxAttempts: 1,
    handler: async (_p: null, ctx) => {
      if (ctx.execution === 1) throw new Error('the first run fails');
      return 'a later run succeeds';
    },
  });
  const childOf = async (parentId: string) => (await db.query<{ id: string }>('select id::text from acta.jobs where parent_id = $1', [parentId])).rows[0].id;

  test('retried after its parent was woken and before the parent ran again: the parent waits for its new end', async () => {
    const parent = defineJob({
      name: 'rw-parent-ready',
      handler: async (_p: null, ctx) => {
        await ctx.spawn(child, null);
        return (await ctx.waitForChildren()).map((o) => o.status);
      },
    });
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue(parent, null);
    await runUntil([parent], async () => (await status(id)) === 'waiting', 'the parent spawns and waits');
    const childId = await childOf(id);
    await runUntil([child], async () => (await status(childId)) === 'failed', 'the child fails');
    // Woken: its wait's answer recorded, the parent Ready and not run yet.
    expect(await status(id)).toBe('ready');
    expect(await stepNames(id)).toEqual(['acta:children:0', 'acta:spawn:0']);
    expect(await client.retryJobs({ ids: [childId] })).toEqual([childId]);
    expect(await stepNames(id)).toEqual(['acta:spawn:0']);
    await runUntil([parent], async () => ['waiting', 'succeeded', 'failed'].includes((await status(id))!), 'the parent runs again');
    // It parked again for the retried child, rather than replay an answer that saw it failed.
    expect(await status(id)).toBe('waiting');
    await runUntil([parent, child], async () => (await status(id)) === 'succeeded', 'the child ends, the parent resumes');
    expect(await client.result(id)).toEqual(['succeeded']);
  });

  test('retried while its parent, past its children wait, waits for a signal: the replay waits for the child again', async () => {
    const parent = defineJob({
      name: 'rw-parent-signal',
      handler: async (_p: null, ctx) => {
        await ctx.spawn(child, null);
        const statuses = (await ctx.waitForChildren()).map((o) => o.status);
        await ctx.waitForSignal('go');
        return statuses;
      },
    });
    const client = createClient({ force: true, db });
    const { id } = await client.enqueue(parent, null);
    await runUntil([parent], async () => (await status(id)) === 'waiting', 'the parent spawns and waits');
    const childId = await childOf(id);
    await runUntil([parent, child], async () => (await status(childId)) === 'failed' && (await stepNames(id)).length === 2 && (await status(id)) === 'waiting', 'the child fails, the parent waits for its signal');
    expect(await client.retryJobs({ ids: [childId] })).toEqual([childId]);
    expect(await client.signal(id, 'go', null)).toMatchObject({ delivered: true });
    await runUntil([parent], async () => ['waiting', 'succeeded', 'failed'].includes((await status(id))!), 'the parent runs again');
    expect(await status(id)).toBe('waiting');
    await runUntil([parent, child], async () => (await status(id)) === 'succeeded', 'the child ends, the parent resumes');
    expect(await client.result(id)).toEqual(['succeeded']);
  });
});

test('a retried job whose signal wait timed out waits for it again; a signal it had received stays received', async () => {
  let timeoutMs = 0;
  const runs: string[] = [];
  const job = defineJob({
    name: 'rw-timed-out',
    handler: async (_p: null, ctx) => {
      const first = await ctx.waitForSignal<string>('first');
      runs.push(first);
      const second = await ctx.waitForSignal<string>('second', { timeoutMs });
      return [first, second];
    },
  });
  const client = createClient({ force: true, db });
  const { id } = await client.enqueue(job, null);
  expect(await client.signal(id, 'first', 'a')).toMatchObject({ delivered: true });
  await runUntil([job], async () => (await status(id)) === 'failed', 'the second wait times out');
  expect((await client.getJob(id))!.error).toMatchObject({ name: 'SignalTimeoutError' });
  timeoutMs = 60_000;
  expect(await client.retryJobs({ ids: [id] })).toEqual([id]);
  expect(await stepNames(id)).toEqual(['acta:signal:0']);
  await runUntil([job], async () => ['waiting', 'succeeded', 'failed'].includes((await status(id))!), 'the retried job runs');
  expect(await status(id)).toBe('waiting');
  expect(await client.signal(id, 'second', 'b')).toMatchObject({ delivered: true, consumed: true });
  await runUntil([job], async () => (await status(id)) === 'succeeded', 'the job resumes');
  expect(await client.result(id)).toEqual(['a', 'b']);
  expect(runs.every((r) => r === 'a')).toBe(true);
});
