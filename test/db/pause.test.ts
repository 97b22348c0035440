// Pause and resume on real workers (docs/DESIGN.md, "Decisions for recurring work, workflows and
// operating"; sql/functions/pause.sql, resume.sql, claim_jobs.sql): claims stop within one wakeup,
// workers started during the pause claim nothing, running attempts finish, and a resume wakes the
// claimers at once. Every worker here has a safety poll of 60 s, so whatever runs within the test's
// waits was woken by NOTIFY, not polled.
import { createClient, createWorker, defineJob, type Worker } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
const workers: Worker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.pauses');
});

const SAFETY_POLL_MS = 60_000;
let release: () => void = () => undefined;
let gate = new Promise<void>((r) => (release = r));
const held = defineJob({ name: 'held', handler: () => gate });
const quick = defineJob({ name: 'quick', handler: async () => null });

async function start(definitions = [held, quick], executors = 2): Promise<Worker> {
  const worker = createWorker({ db, definitions, logger: silentLogger, executors, safetyPollMs: SAFETY_POLL_MS });
  workers.push(worker);
  await worker.start();
  return worker;
}
const count = async (where: string, params: unknown[] = []) => Number((await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where ${where}`, params)).rows[0].n);
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a pause stops the claims of every worker within one wakeup, a worker started later too; the running attempt finishes; resume wakes them at once', async () => {
  gate = new Promise<void>((r) => (release = r));
  const client = createClient({ db });
  await start();
  const { id: running } = await client.enqueue('held', {});
  await waitFor(async () => (await count(`status = 'executing'`)) === 1, 'the held job to run');

  const paused = await client.pause({ by: 'ops', reason: 'incident' });
  expect(paused).toMatchObject({ namespace: 'default', definition: null, pausedBy: 'ops', reason: 'incident', created: true });
  // After the pause returned, every claim's statement sees it: what the workers claim from here on is nothing.
  const fence = (await db.query<{ t: Date }>('select clock_timestamp() as t')).rows[0].t;
  await client.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ definition: 'quick', payload: { i } }))); // each enqueue notifies
  await start(); // a worker started during the pause: its first claim (at LISTEN's connect) finds it paused
  release(); // the running attempt finishes, and its worker claims again
  await waitFor(async () => (await client.getJob(running))?.status === 'succeeded', 'the running job to finish');
  await settle(1_000);
  expect(await count(`status = 'ready' and definition = 'quick'`)).toBe(20);
  expect(await count('claimed_at > $1', [fence])).toBe(0);

  expect(await client.resume()).toBe(true);
  await waitFor(async () => (await count(`status = 'succeeded' and definition = 'quick'`)) === 20, 'the woken workers to run every job', 10_000);
  expect((await client.getJob(running))?.status).toBe('succeeded');
}, 30_000);

test("a paused definition stops only its own claims; the namespace's other definitions run", async () => {
  const client = createClient({ db });
  await client.pause({ definition: 'quick', reason: 'bad deploy' });
  await start([quick, held]);
  const { id: other } = await client.enqueue('held', {});
  gate = Promise.resolve();
  const { id: stopped } = await client.enqueue('quick', {});
  await waitFor(async () => (await client.getJob(other))?.status === 'succeeded', 'the other definition to run');
  await settle(500);
  expect((await client.getJob(stopped))?.status).toBe('ready');
  expect(await client.resume({ definition: 'quick' })).toBe(true);
  await waitFor(async () => (await client.getJob(stopped))?.status === 'succeeded', 'the resumed definition to run', 10_000);
}, 30_000);

test('pause and resume refuse bad input with ConfigError, before anything is written', async () => {
  const client = createClient({ db });
  await expect(client.pause({ definition: '' })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.pause({ reason: 'x'.repeat(1_001) })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.pause({ by: ' ' })).rejects.toMatchObject({ code: 'ACTA_CONFIG', message: expect.stringContaining('pause: by must name who pauses') });
  await expect(client.pause({ namespace: 'a\u0000b' })).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  await expect(client.resume({ nope: 1 } as never)).rejects.toMatchObject({ code: 'ACTA_CONFIG' });
  expect(await count('true')).toBe(0);
  expect((await db.query('select * from acta.pauses')).rows).toEqual([]);
});
