// A succeeded job leaves acta.jobs for acta.succeeded_jobs in its completion's call, and its row is
// its last attempt's record (migration 0023; docs/how-it-works.md, "The ledger, as stored"). Every
// reader of a finished job still finds it: getJob, result, why, the admin listing and bulk delete,
// signals, retention.
import { createClient, createWorker, defineJob } from '../../src';
import { pruneJobs } from '../../src/db/retention';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();
beforeEach(async () => {
  await db.query('truncate acta.jobs, acta.succeeded_jobs, acta.executions, acta.steps, acta.signals, acta.workers, acta.definitions');
});

const where = async (id: string) => {
  const { rows } = await db.query<{ live: boolean; moved: boolean; ledger: string }>(
    `select exists (select 1 from acta.jobs where id = $1) as live, exists (select 1 from acta.succeeded_jobs where id = $1) as moved,
            (select count(*) from acta.executions where job_id = $1)::text as ledger`,
    [id],
  );
  return rows[0];
};
const succeeded = async (id: string) =>
  (await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0]?.status === 'succeeded';

test('acta.succeeded_jobs has the columns of acta.jobs, in its order, so that acta.all_jobs shows both', async () => {
  const columns = (table: string) =>
    db.query<{ name: string; type: string }>(
      `select a.attname as name, format_type(a.atttypid, a.atttypmod) as type from pg_attribute a
        where a.attrelid = $1::regclass and a.attnum > 0 and not a.attisdropped order by a.attnum`,
      [table],
    );
  const jobs = (await columns('acta.jobs')).rows;
  expect(jobs.length).toBeGreaterThan(30);
  expect((await columns('acta.succeeded_jobs')).rows).toEqual(jobs);
  expect((await columns('acta.all_jobs')).rows).toEqual(jobs);
});

test('a plain success moves, its row its attempt\'s record; a retried one keeps its failed attempt; keyed and watched rows stay', async () => {
  let failOnce = true;
  const plain = defineJob<{ n: number }, { doubled: number }>({ name: 'sj-plain', handler: async (p) => ({ doubled: p.n * 2 }) });
  const flaky = defineJob({
    name: 'sj-flaky',
    backoff: { delayMs: 10 },
    handler: async () => {
      if (failOnce) {
        failOnce = false;
        throw new Error('once');
      }
      return 'second';
    },
  });
  const client = createClient({ force: true, db, definitions: [plain, flaky] });
  const moved = (await client.enqueue(plain, { n: 21 })).id;
  const retried = (await client.enqueue(flaky, {})).id;
  const keyed = (await client.enqueue(plain, { n: 1 }, { idempotencyKey: 'sj-key' })).id;
  // result() of a job not yet run watches it: it stays in acta.jobs. Watched before any worker
  // runs (a worker started first could complete it before the watch).
  const watched = (await client.enqueue(plain, { n: 5 })).id;
  const result = client.result(watched, { timeoutMs: 20_000 });
  await waitFor(async () => (await db.query<{ watched: boolean }>('select watched from acta.jobs where id = $1', [watched])).rows[0]?.watched === true, 'the job to be watched');
  const worker = createWorker({ db, definitions: [plain, flaky], logger: silentLogger, executors: 4 });
  await worker.start();
  try {
    expect(await result).toEqual({ doubled: 10 });
    await waitFor(async () => (await succeeded(moved)) && (await succeeded(retried)) && (await succeeded(keyed)), 'the jobs to succeed');

    expect(await where(moved)).toEqual({ live: false, moved: true, ledger: '0' });
    expect(await where(retried)).toEqual({ live: false, moved: true, ledger: '1' });
    expect(await where(keyed)).toEqual({ live: true, moved: false, ledger: '1' });
    expect(await where(watched)).toEqual({ live: true, moved: false, ledger: '1' });

    const job = (await client.getJob(moved))!;
    expect(job).toMatchObject({ status: 'succeeded', result: { doubled: 42 }, attempts: 1, execution: 1, error: null });
    expect(job.executions).toEqual([
      { execution: 1, workerId: worker.id, claimedAt: expect.any(Date), finishedAt: job.finishedAt, outcome: 'succeeded', charged: true, error: null },
    ]);
    expect(job.executions[0].claimedAt.getTime()).toBeLessThanOrEqual(job.finishedAt!.getTime());
    const twice = (await client.getJob(retried))!;
    expect(twice).toMatchObject({ status: 'succeeded', result: 'second', attempts: 2, error: null });
    expect(twice.executions.map((e) => [e.execution, e.outcome, e.workerId])).toEqual([
      [1, 'failed', worker.id],
      [2, 'succeeded', worker.id],
    ]);
    // A job that succeeded before result() watched it: read from acta.succeeded_jobs.
    expect(await client.result(moved, { timeoutMs: 5_000 })).toEqual({ doubled: 42 });
  } finally {
    await worker.stop();
  }
});

test('why, listJobs, signal, deleteJobs and retention find a moved job', async () => {
  const plain = defineJob({ name: 'sj-ops', handler: async () => 'ok' });
  const client = createClient({ force: true, db, definitions: [plain] });
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await client.enqueue(plain, { i })).id);
  const kept = (await client.enqueue(plain, { i: 4 }, { idempotencyKey: 'sj-ops-key' })).id;
  const worker = createWorker({ db, definitions: [plain], logger: silentLogger, executors: 4 });
  await worker.start();
  try {
    await waitFor(async () => (await Promise.all([...ids, kept].map(succeeded))).every(Boolean), 'the jobs to succeed');
  } finally {
    await worker.stop();
  }
  expect((await where(ids[0])).moved).toBe(true);

  expect((await client.why(ids[0]))!.reasons[0]).toMatchObject({ cause: 'ended' });
  // Newest first across both tables.
  const page = await client.listJobs({ status: 'succeeded' });
  expect(page.jobs.map((j) => j.id)).toEqual([kept, ...[...ids].reverse()]);
  expect((await client.namespaces()).find((n) => n.name === 'default')!.counts.succeeded).toBe(5);
  expect(await client.signal(ids[1], 'late', {})).toEqual({ delivered: false, jobId: ids[1], reason: 'ended' });

  await db.query(`insert into acta.steps (job_id, execution, name, result) values ($1, 1, 's', '1')`, [ids[0]]);
  expect(await client.deleteJobs({ ids: [ids[0]] })).toEqual([ids[0]]);
  expect(await where(ids[0])).toEqual({ live: false, moved: false, ledger: '0' });
  expect((await db.query('select 1 from acta.steps where job_id = $1', [ids[0]])).rows).toEqual([]);
  expect(await client.getJob(ids[0])).toBeNull();

  // Retention at age 0: the moved rows and the kept one alike.
  expect(await pruneJobs(db, { namespace: 'default', ages: { succeededMs: 0, cancelledMs: null, failedMs: null }, limit: 100, timeoutMs: 5_000 })).toBe(4);
  expect((await db.query('select id from acta.all_jobs where definition = $1', ['sj-ops'])).rows).toEqual([]);
});
