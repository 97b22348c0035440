// Two workers, each on its own pool, share one database: a few thousand jobs, every one run
// exactly once, checked from the database alone (DESIGN.md: the ledger makes every guarantee
// checkable afterwards) and from the handlers' own record.
import { createClient, createWorker, defineJob, type Db, type Worker } from '../../src';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const JOBS = 3_000;

let tdb: TestDatabase;
let dbA: Db;
let dbB: Db;

beforeAll(async () => {
  tdb = await createTestDatabase();
  dbA = tdb.open();
  dbB = tdb.open();
});
afterAll(() => tdb.drop());

test(`two workers on one database run each of ${JOBS} jobs exactly once, and both do some of the work`, async () => {
  const invocations = new Map<string, number>();
  const byWorker = new Map<string, number>();
  const noop = (label: string) =>
    defineJob<{ i: number }>({
      name: 'noop',
      handler: async (_p, ctx) => {
        invocations.set(ctx.jobId, (invocations.get(ctx.jobId) ?? 0) + 1);
        byWorker.set(label, (byWorker.get(label) ?? 0) + 1);
        await new Promise((r) => setImmediate(r));
      },
    });
  const workers: Worker[] = [
    createWorker({ db: dbA, definitions: [noop('a')], executors: 8, logger: silentLogger }),
    createWorker({ db: dbB, definitions: [noop('b')], executors: 8, logger: silentLogger }),
  ];
  await Promise.all(workers.map((w) => w.start()));
  try {
    const enqueued = await createClient({ force: true, db: dbA }).enqueueMany(Array.from({ length: JOBS }, (_, i) => ({ definition: 'noop', payload: { i } })));
    expect(enqueued.every((r) => r.created)).toBe(true);
    await waitFor(
      async () => Number((await dbA.query<{ n: string }>(`select count(*) as n from acta.all_jobs where status = 'succeeded'`)).rows[0].n) === JOBS,
      'every job to succeed',
      50_000,
      100,
    );
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }

  const { rows: jobs } = await dbA.query<{ status: string; execution: number; attempts: number; n: string }>(
    'select status, execution, attempts, count(*) as n from acta.all_jobs group by 1, 2, 3',
  );
  expect(jobs).toEqual([{ status: 'succeeded', execution: 1, attempts: 1, n: String(JOBS) }]);
  const { rows: perJob } = await dbA.query<{ executions: string; jobs: string }>(
    `select per.n as executions, count(*) as jobs
       from acta.all_jobs j
       left join (select job_id, count(*) as n from acta.all_executions group by job_id) per on per.job_id = j.id
      group by per.n`,
  );
  expect(perJob).toEqual([{ executions: '1', jobs: String(JOBS) }]);
  const { rows: ledger } = await dbA.query<{ execution: number; outcome: string; n: string }>(
    'select execution, outcome, count(*) as n from acta.all_executions group by 1, 2',
  );
  expect(ledger).toEqual([{ execution: 1, outcome: 'succeeded', n: String(JOBS) }]);

  // The handlers' own record: once per job.
  expect(invocations.size).toBe(JOBS);
  expect([...invocations.values()].every((n) => n === 1)).toBe(true);

  // Both workers took part, as the ledger says and as the handlers saw.
  const { rows: shares } = await dbA.query<{ worker_id: string; n: string }>('select worker_id, count(*) as n from acta.all_executions group by worker_id');
  expect(shares.map((s) => s.worker_id).sort()).toEqual(workers.map((w) => w.id).sort());
  expect(shares.every((s) => Number(s.n) > 0)).toBe(true);
  expect(byWorker.get('a')! + byWorker.get('b')!).toBe(JOBS);
  const ledgerShare = new Map(shares.map((s) => [s.worker_id, Number(s.n)]));
  expect(ledgerShare.get(workers[0].id)).toBe(byWorker.get('a'));
  expect(ledgerShare.get(workers[1].id)).toBe(byWorker.get('b'));

  const { rows: registered } = await dbA.query<{ id: string; status: string }>('select id, status from acta.workers order by id');
  expect(registered).toEqual(workers.map((w) => ({ id: w.id, status: 'stopped' })).sort((x, y) => x.id.localeCompare(y.id)));
});
