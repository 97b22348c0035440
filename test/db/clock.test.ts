/**
 * The worker measures its durations (attempt deadlines, timeouts) on a monotonic clock: a step of
 * the wall clock (NTP, `date -s`) must not fire them (DESIGN.md: lease times are judged by the
 * database's clock, never a worker's).
 */
import { createClient, createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

test('the wall clock jumping 10 minutes ahead while handlers run fails no attempt', async () => {
  // The case it guards: with Date.now moved 10 min ahead, every running attempt failed with
  // "attempt deadline passed" (its deadline was measured on Date.now) and was charged.
  const realNow = Date.now;
  const job = defineJob({
    name: 'clock',
    maxAttempts: 1,
    async handler() {
      Date.now = () => realNow() + 600_000;
      try {
        await new Promise((r) => setTimeout(r, 1_500)); // the heartbeat checks deadlines every H/4 = 125 ms
      } finally {
        Date.now = realNow;
      }
      return 'done';
    },
  });
  const { id } = await createClient({ force: true, db }).enqueue('clock', {});
  const worker = createWorker({ db, definitions: [job], logger: silentLogger, heartbeatIntervalMs: 500 });
  await worker.start();
  try {
    // Until the job ended ('ready' is also where it starts: a poll before the claim must not end the wait).
    await waitFor(async () => ['succeeded', 'failed'].includes((await db.query<{ status: string }>('select status from acta.all_jobs where id = $1', [id])).rows[0].status), 'the job to end');
  } finally {
    Date.now = realNow;
    await worker.stop();
  }
  const { rows } = await db.query<{ status: string; result: unknown; error: unknown }>('select status, result, error from acta.all_jobs where id = $1', [id]);
  expect(rows).toEqual([{ status: 'succeeded', result: 'done', error: null }]);
}, 30_000);
