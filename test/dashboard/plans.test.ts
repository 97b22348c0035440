// Every statement the dashboard's pages send, planned on a table of 1,000,000 jobs, 1,000,000
// attempts and 1,000,000 successes moved to acta.succeeded_jobs (migration 0023) over a week, with
// statistics: none reads acta.jobs, acta.succeeded_jobs or acta.executions whole (docs/DESIGN.md,
// "Dashboard": every list keyset-paginated and index-backed).
import { randomUUID } from 'node:crypto';
import type { Db } from '../../src';
import { registerWorker } from '../../src/db/workers';
import { startDashboard } from '../../src/ops/dashboard/server';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';

const { db } = useTestDatabase({ timeoutMs: 600_000 });

test('the overview, job list (filtered, paged), job page, workers, schedules and alerts pages read indexes only', async () => {
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
  await db.query('vacuum analyze acta.jobs');
  await db.query('vacuum analyze acta.succeeded_jobs');
  await db.query('vacuum analyze acta.executions');
  await db.query(`select brin_summarize_new_values('acta.executions_finished_idx')`);

  const sent: { text: string; params: unknown[] }[] = [];
  const watched = { ...db, query: (text: string, params?: unknown[]) => (sent.push({ text, params: params ?? [] }), db.query(text, params)) } as Db;
  const dashboard = await startDashboard({ db: watched, port: 0, logger: silentLogger });
  try {
    for (const p of ['/', '/workers', '/jobs', '/jobs?status=failed', '/jobs?status=succeeded&definition=d3', '/jobs?status=ready&cursor=500000', '/jobs?status=executing', '/jobs/999000', '/jobs/999999', '/jobs/1999999', '/schedules', '/alerts']) {
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
    expect({ text: s.text.slice(0, 80), plan }).not.toEqual(expect.objectContaining({ plan: expect.stringMatching(/Seq Scan on (jobs|succeeded_jobs|executions)/) }));
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
