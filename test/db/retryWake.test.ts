import { createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

// A retry's completion commits after the executor freed its permit, so the claimer may already
// have found nothing due and gone to sleep. The committed retry must wake it: a retry due in
// 50 ms must not wait for a (here 60 s) safety poll.

const { db } = useTestDatabase();

test('a retry due in 50 ms runs without waiting for the safety poll', async () => {
  const boom = defineJob({ name: 'boom', backoff: { delayMs: 50 }, handler: async () => { throw new Error('boom'); } });
  const worker = createWorker({ db, definitions: [boom], logger: silentLogger, executors: 2, safetyPollMs: 60_000 });
  await worker.start();
  try {
    await createClient({ force: true, db }).enqueue('boom', {}, { maxAttempts: 3 });
    await waitFor(async () => (await db.query(`select 1 from acta.jobs where status = 'failed'`)).rows.length === 1, 'the job to fail after 3 attempts', 15_000);
  } finally {
    await worker.stop();
  }
  const { rows } = await db.query<{ max_gap_ms: number }>(
    `select max(gap)::float8 as max_gap_ms from (
       select (extract(epoch from (lead(claimed_at) over (partition by job_id order by execution) - finished_at)) * 1000) as gap
       from acta.executions) g`,
  );
  expect(rows[0].max_gap_ms).toBeLessThan(15_000);
}, 60_000);
