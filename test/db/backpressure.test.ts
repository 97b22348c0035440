import { Client } from 'pg';
import { createClient, createWorker, defineJob } from '../../src';
import { PIPELINE } from '../../src/config';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

// DESIGN.md, "Backpressure": the completed channel holds 128 + N; when it fills, intake stops, so
// memory stays bounded when the database is slow. Here completion writes are stalled for real:
// another session holds an EXCLUSIVE lock on acta.executions and acta.succeeded_jobs, one of which
// every complete_executions call of successes inserts into (a moved success: migration 0023), so
// each write waits.

const { db, tdb } = useTestDatabase();

const claimed = async () =>
  Number((await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where execution > 0`)).rows[0].n);

test('with completion writes stalled, the worker stops claiming at 128 + N in flight, and resumes when they land', async () => {
  const executors = 8;
  const jobs = 1_000;
  await createClient({ force: true, db }).enqueueMany(Array.from({ length: jobs }, (_, i) => ({ definition: 'noop', payload: { i } })));
  const locker = new Client({ connectionString: tdb.url });
  await locker.connect();
  await locker.query('begin');
  await locker.query('lock table acta.executions, acta.succeeded_jobs in exclusive mode');
  const worker = createWorker({ db, definitions: [defineJob({ name: 'noop', handler: async () => null })], executors, logger: silentLogger });
  try {
    await worker.start();
    // Intake stops once 128 + N completions wait; at most one more claim of ≤ N rows was in flight.
    const capacity = PIPELINE.batchMaxCount + executors;
    await waitFor(async () => (await claimed()) >= capacity, 'the completed channel to fill');
    await new Promise((r) => setTimeout(r, 1_500)); // well past the 1 s safety poll
    const stalled = await claimed();
    expect(stalled).toBeGreaterThanOrEqual(capacity);
    expect(stalled).toBeLessThanOrEqual(capacity + executors);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await claimed()).toBe(stalled); // nothing more was claimed while writes were stalled
  } finally {
    await locker.query('rollback');
    await locker.end();
  }
  // Writes land; intake resumes and every job completes exactly once.
  await waitFor(
    async () => Number((await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where status = 'succeeded'`)).rows[0].n) === jobs,
    'every job to succeed',
    30_000,
  );
  await worker.stop();
  const { rows } = await db.query<{ n: string; max: number }>(`select count(*) as n, max(execution) as max from acta.all_executions`);
  expect(Number(rows[0].n)).toBe(jobs);
  expect(rows[0].max).toBe(1);
});
