// Every statement the dashboard's pages send, planned on a table of 1,000,000 jobs, 1,000,000
// attempts and 1,000,000 successes moved to acta.succeeded_jobs (migration 0023) over a week, a
// parent of 50,000 children and 200,000 signals, with statistics: none reads acta.jobs,
// acta.succeeded_jobs, acta.executions or acta.signals whole, and a page of a job's children or
// signals reads that page in index order, not all of them sorted (docs/DESIGN.md, "Dashboard":
// every list keyset-paginated and index-backed).
import { randomUUID } from 'node:crypto';
import type { Db } from '../../src';
import { registerWorker } from '../../src/db/workers';
import { startDashboard } from '../../src/ops/dashboard/server';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase({ timeoutMs: 600_000 });

test('the overview, job list (filtered, paged), job page (its children and signals paged), workers, schedules and alerts pages read indexes only', async () => {
  const workerId = randomUUID();
  await registerWorker(db, { workerId, namespace: 'default', hostname: 'plans', pid: 1, definitions: ['d0', 'd1'], maxAttempts: [null, null], leaseMs: 60_000, build: null, policies: {} });
  await db.query(`insert into acta.jobs (namespace, definition, payload, status, finished_at, lease_holder, lease_expires_at, created_at)
                  select 'default', 'd' || (g % 10), '{}', case when g % 1000 = 0 then 'failed' when g % 997 = 0 then 'executing' when g % 10 = 0 then 'ready' else 'succeeded' end,
                         case when g % 10 <> 0 then now() - (1000000 - g) * interval '600 ms' end, case when g % 997 = 0 then $1::uuid end,
                         case when g % 997 = 0 then now() + interval '1 minute' end, now() - (1000000 - g) * interval '600 ms'
                  from generate_series(1, 1000000) g`, [workerId]);
  // The attempt ledger in the order attempts finish: one a job, over the last week.
  await db.query(`insert into acta.executions (job_id, execution, worker_id, claimed_at, finished_at, outcome, charged)
                  select g, 1, $1::uuid, now() - (1000000 - g) * interval '600 ms', now() - (1000000 - g) * interval '600 ms',
                         case when g % 1000 = 0 then 'failed_final' else 'succeeded' end, true
                  from generate_series(1, 1000000) g`, [workerId]);
  // Successes that left acta.jobs at their completion, as complete_executions moves them: each row its
  // last attempt's record (no acta.executions row), finishing over the same week.
  await db.query(`insert into acta.succeeded_jobs (id, namespace, definition, payload, status, priority, run_at, execution, attempts, uncharged_returns,
                                                   lease_holder, claimed_at, started, created_at, finished_at, watched)
                  select 1000000 + g, 'default', 'd' || (g % 10), '{}', 'succeeded', 0, now() - (1000000 - g) * interval '600 ms', 1, 1, 0,
                         $1::uuid, now() - (1000000 - g) * interval '600 ms', false, now() - (1000000 - g) * interval '600 ms',
                         now() - (1000000 - g) * interval '600 ms' + interval '300 ms', false
                  from generate_series(1, 1000000) g`, [workerId]);
  // Job 999000 a parent of 50,000 children (the 50,000 jobs below 950,001); job 999999 a child of a
  // parent that succeeded and moved (1999999). 200,000 signals, 20,000 of them job 999000's, half consumed.
  await db.query('update acta.jobs set parent_id = 999000 where id between 900001 and 950000');
  await db.query('update acta.jobs set parent_id = 1999999 where id = 999999');
  await db.query(`insert into acta.signals (job_id, name, payload, sent_at, consumed_at)
                  select case when g <= 20000 then 999000 else g * 5 end, 's' || (g % 7), '{}', now(), case when g % 2 = 0 then now() end
                  from generate_series(1, 200000) g`);
  await db.query('vacuum analyze acta.signals');
  await db.query('vacuum analyze acta.jobs');
  await db.query('vacuum analyze acta.succeeded_jobs');
  await db.query('vacuum analyze acta.executions');
  await db.query(`select brin_summarize_new_values('acta.executions_finished_idx')`);

  const sent: { text: string; params: unknown[] }[] = [];
  const watched = { ...db, query: (text: string, params?: unknown[]) => (sent.push({ text, params: params ?? [] }), db.query(text, params)) } as Db;
  const dashboard = await startDashboard({ db: watched, port: 0, logger: silentLogger });
  try {
    for (const p of ['/', '/workers', '/jobs', '/jobs?status=failed', '/jobs?status=succeeded&definition=d3', '/jobs?status=ready&cursor=500000', '/jobs?status=executing', '/jobs/999000', '/jobs/999000?children=920000&signals=10000', '/jobs/999000?children=949990&signals=19990', '/jobs/999999', '/jobs/1999999', '/schedules', '/alerts']) {
      const res = await fetch(`${dashboard.url}${p}`);
      expect({ p, status: res.status }).toEqual({ p, status: 200 });
    }
  } finally {
    await dashboard.close();
  }
  expect(sent.length).toBeGreaterThanOrEqual(12);
  for (const s of sent) {
    const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${s.text}`, s.params);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    expect({ text: s.text.slice(0, 80), plan }).not.toEqual(expect.objectContaining({ plan: expect.stringMatching(/Seq Scan on (jobs|succeeded_jobs|executions|signals)/) }));
  }
  // Every page of a job's children or signals (the first, one within, the last): along
  // jobs_parent_idx or signals_job_idx in id order (migration 0025), no sort of the job's rows, nor
  // a walk of the primary key from the cursor filtering on the job (the planner's choice for the
  // pages within and last when the statement said `parent_id = $1 and id > $2 order by id`).
  for (const [from, index] of [['c.parent_id = $1', 'jobs_parent_idx'], ['s.job_id = $1', 'signals_job_idx']]) {
    const pages = sent.filter((s) => s.text.includes(from) && s.params[0] === '999000');
    expect(pages.map((s) => s.params[1])).toEqual(expect.arrayContaining(['0', index === 'jobs_parent_idx' ? '949990' : '19990']));
    for (const page of pages) {
      const { rows: planned } = await db.query<{ 'QUERY PLAN': string }>(`explain ${page.text}`, page.params);
      const plan = planned.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toContain(index);
      expect({ after: page.params[1], plan }).not.toEqual(expect.objectContaining({ plan: expect.stringMatching(/Sort|jobs_pkey|signals_pkey/) }));
    }
  }
  // The chart's statement (attemptsPerMinute) reads the attempt ledger through its BRIN index, and
  // the moved successes through succeeded_jobs_finished_idx.
  const chart = sent.find((s) => s.text.includes("count(*) filter (where e.outcome = 'succeeded') as succeeded"));
  expect(chart).toBeDefined();
  const { rows } = await db.query<{ 'QUERY PLAN': string }>(`explain ${chart!.text}`, chart!.params);
  const chartPlan = rows.map((r) => r['QUERY PLAN']).join('\n');
  expect(chartPlan).toContain('executions_finished_idx');
  expect(chartPlan).toContain('succeeded_jobs_finished_idx');
}, 600_000);
