// acta_jobs{namespace,definition,status} on a real database (src/worker/metrics.ts, src/db/jobs.ts
// countJobs; docs/operating.md, "Metrics"): the namespace's Ready, Waiting and Executing jobs by
// definition, read at scrape time along indexes, at most once per JOBS_TTL_MS (virtual time here).
import { randomUUID } from 'node:crypto';
import { createClient, createWorker, defineJob } from '../../src';
import { claimJobs, countJobs } from '../../src/db/jobs';
import { registerWorker } from '../../src/db/workers';
import { JOBS_COUNT_CAP, JOBS_TTL_MS } from '../../src/worker/metrics';
import { VirtualClock } from '../../src/testing';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase({ timeoutMs: 60_000 });

const handler = async () => null;
/** The acta_jobs lines of a scrape, sorted. */
const jobLines = (text: string) => text.split('\n').filter((l) => l.startsWith('acta_jobs{')).sort();

test("a worker's acta_jobs counts its namespace's ready, waiting and executing jobs by definition, 0 for its own definitions with none, and reads the database at most once per JOBS_TTL_MS", async () => {
  const namespace = `depth-${randomUUID().slice(0, 8)}`;
  const clock = new VirtualClock();
  const worker = createWorker({ db, namespace, definitions: [defineJob({ name: 'a', handler }), defineJob({ name: 'b', handler })], logger: silentLogger, listen: false, scheduler: clock.scheduler });
  const client = createClient({ db, namespace, force: true });
  await client.enqueueMany([{ definition: 'a', payload: 1 }, { definition: 'a', payload: 2 }, { definition: 'a', payload: 3 }, { definition: 'other', payload: 4 }]);
  const workerId = randomUUID();
  await registerWorker(db, { workerId, namespace, hostname: 'depth-test', pid: 1, definitions: ['a'], maxAttempts: [null], leaseMs: 60_000, build: null, policies: {} });
  expect((await claimJobs(db, { namespace, workerId, definitions: ['a'], limit: 1, leaseMs: 60_000 })).rows).toHaveLength(1);
  const parked = (await client.enqueue('other', 5)).id;
  await db.query(`update acta.jobs set status = 'waiting' where id = $1`, [parked]);
  // Another namespace's jobs are not counted.
  await createClient({ db, namespace: `${namespace}-x`, force: true }).enqueue('a', 6);

  const at = (definition: string, status: string, n: number) => `acta_jobs{namespace="${namespace}",definition="${definition}",status="${status}"} ${n}`;
  const first = [at('a', 'ready', 2), at('a', 'waiting', 0), at('a', 'executing', 1), at('b', 'ready', 0), at('b', 'waiting', 0), at('b', 'executing', 0), at('other', 'ready', 1), at('other', 'waiting', 1)].sort();
  expect(jobLines(await worker.metrics.registry.metrics())).toEqual(first);

  // Within the TTL a scrape answers from the last read; after it, from a new one.
  await client.enqueue('b', 7);
  await clock.advance(JOBS_TTL_MS - 1);
  expect(jobLines(await worker.metrics.registry.metrics())).toEqual(first);
  await clock.advance(1);
  expect(jobLines(await worker.metrics.registry.metrics())).toEqual(first.map((l) => (l === at('b', 'ready', 0) ? at('b', 'ready', 1) : l)).sort());
});

test('countJobs reads indexes, not the table, on a table of 200,000 jobs with statistics, and counts each status up to its cap', async () => {
  const namespace = `depth-${randomUUID().slice(0, 8)}`;
  await db.query(
    `insert into acta.jobs (namespace, definition, payload, status, finished_at, lease_holder, lease_expires_at)
     select $1, 'd' || (g % 10), '{}', case when g % 997 = 0 then 'executing' when g % 100 = 1 then 'waiting' when g % 10 = 0 then 'ready' else 'succeeded' end,
            case when g % 997 <> 0 and g % 100 <> 1 and g % 10 <> 0 then now() end,
            case when g % 997 = 0 then gen_random_uuid() end, case when g % 997 = 0 then now() + interval '1 minute' end
     from generate_series(1, 200000) g`,
    [namespace],
  );
  await db.query('vacuum analyze acta.jobs');
  const sent: { text: string; params: unknown[] }[] = [];
  const watched = { query: (text: string, params: unknown[]) => (sent.push({ text, params }), db.query(text, params)) } as unknown as typeof db;
  const counts = await countJobs(watched, namespace, JOBS_COUNT_CAP);
  const total = (status: string) => counts.filter((c) => c.status === status).reduce((a, c) => a + c.count, 0);
  const expected = (await db.query<{ status: string; n: string }>(`select status, count(*) as n from acta.jobs where namespace = $1 and status in ('ready', 'waiting', 'executing') group by status`, [namespace])).rows;
  for (const r of expected) expect([r.status, total(r.status)]).toEqual([r.status, Number(r.n)]);
  const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${sent[0].text}`, sent[0].params);
  const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
  expect(plan).not.toMatch(/Seq Scan on jobs/);
  expect(plan).toMatch(/jobs_list_idx/);
  expect(plan).toMatch(/jobs_lease_idx/);
  // The cap: each status's oldest jobs by id, up to it.
  const capped = await countJobs(db, namespace, 100);
  for (const status of ['ready', 'waiting', 'executing']) expect(capped.filter((c) => c.status === status).reduce((a, c) => a + c.count, 0)).toBe(Math.min(100, total(status)));
}, 120_000);
