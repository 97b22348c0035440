/**
 * A claim that reaches its worker after the attempt deadline (the case it guards: a 100 MB
 * payload at H = 1 s took 3.5 s to arrive and was handed back uncharged on every claim, forever).
 * Here every claim answer is held back past the deadline: the job goes back uncharged at most
 * PIPELINE.unchargedReturnsMax (3) times, recovery's bound, then the next expiry costs an attempt
 * and, with its attempts used up, the job ends Failed with ClaimExpiredError. Its handler never runs.
 */
import { createClient, createWorker, defineJob, type Db } from '../../src';
import { leaseClock, PIPELINE } from '../../src/config';
import { aroundStatements } from '../helpers/around';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

const H = 400;
const clock = leaseClock(H);
// Past the attempt deadline (2.5 H = 1 000 ms after the claim's start), well inside the lease
// (4 H = 1 600 ms), so the expired claim's own write lands before recovery could take the row.
const CLAIM_DELAY_MS = clock.attemptDeadlineMs + 200;

/** `db` whose claim answers arrive CLAIM_DELAY_MS late (the claim itself commits at once). */
function slowClaims(inner: Db): Db {
  return {
    ...aroundStatements(inner, async (text, _params, run) => {
      const result = await run();
      if (text.includes('claim_jobs')) await new Promise((resolve) => setTimeout(resolve, CLAIM_DELAY_MS));
      return result;
    }),
    close: async () => undefined,
  };
}

test('a claim that always arrives after its deadline is returned uncharged 3 times, then costs an attempt', async () => {
  expect(CLAIM_DELAY_MS).toBeLessThan(clock.leaseMs - 300);
  let runs = 0;
  const late = defineJob({ name: 'late', handler: () => void runs++ });
  const worker = createWorker({ db: slowClaims(db), definitions: [late], logger: silentLogger, executors: 2, heartbeatIntervalMs: H });
  await worker.start();
  let id: string;
  try {
    ({ id } = await createClient({ force: true, db }).enqueue('late', {}, { maxAttempts: 1 }));
    await waitFor(async () => (await db.query(`select 1 from acta.jobs where status = 'failed'`)).rows.length === 1, 'the job to end Failed', 30_000);
  } finally {
    await worker.stop();
  }
  expect(runs).toBe(0);
  const { rows: [job] } = await db.query<{ attempts: number; execution: number; uncharged_returns: number; error: { name: string; message: string } }>(
    'select attempts, execution, uncharged_returns, error from acta.jobs where id = $1',
    [id],
  );
  expect(job).toMatchObject({ attempts: 1, execution: PIPELINE.unchargedReturnsMax + 1, uncharged_returns: PIPELINE.unchargedReturnsMax });
  expect(job.error).toMatchObject({ name: 'ClaimExpiredError', message: expect.stringContaining('after its attempt deadline') });
  const { rows: ledger } = await db.query<{ execution: number; outcome: string; charged: boolean }>(
    'select execution, outcome, charged from acta.executions where job_id = $1 order by execution',
    [id],
  );
  expect(ledger).toEqual([
    { execution: 1, outcome: 'expired', charged: false },
    { execution: 2, outcome: 'expired', charged: false },
    { execution: 3, outcome: 'expired', charged: false },
    { execution: 4, outcome: 'failed_final', charged: true },
  ]);
}, 60_000);
