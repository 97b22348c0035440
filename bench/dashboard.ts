/**
 * The dashboard's pages at scale (bench/README.md, "Dashboard"): N jobs (ROWS, a mix of every
 * status, each finished one with its attempt) in one namespace, then each page rendered R times by
 * a dashboard on a free port, timed from the request to the last byte. Reports each page's p50 and
 * max. A benchmark row, not a test: nothing here asserts a time (test/dashboard/plans.test.ts holds
 * the plans: no sequential scan of acta.jobs or acta.executions).
 *
 *   node dist/bench/dashboard.js [--rows 1000000] [--renders 20] [--json]
 *
 * Default --rows 200000; the scale is --rows 1000000. On BENCH_DATABASE_URL's server
 * (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped after.
 */
import { randomBytes } from 'node:crypto';
import { createPgDb, migrate } from '../src';
import { startDashboard } from '../src/ops/dashboard/server';
import { Admin, moveSucceeded, withDatabase } from './pg';
import { percentile } from './stats';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
};
const ROWS = arg('rows', 200_000);
const RENDERS = arg('renders', 20);
const round = (ms: number) => Math.round(ms * 10) / 10;

async function main(): Promise<void> {
  const server = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = await Admin.open(server);
  const name = `acta_bench_dashboard_${randomBytes(4).toString('hex')}`;
  await admin.createDatabase(name);
  const url = withDatabase(server, name);
  const db = createPgDb({ connectionString: url, max: 4 });
  try {
    await migrate(db);
    const f0 = performance.now();
    for (let done = 0; done < ROWS; done += 250_000) {
      const n = Math.min(250_000, ROWS - done);
      await db.query(
        `with j as (
           insert into acta.jobs (namespace, definition, payload, status, execution, attempts, claimed_at, finished_at, run_at)
           select 'default', 'd' || (g % 8), jsonb_build_object('n', g),
                  (array['ready','succeeded','succeeded','succeeded','failed','cancelled'])[1 + g % 6],
                  case when g % 6 = 0 then 0 else 1 end, case when g % 6 = 0 then 0 else 1 end,
                  case when g % 6 = 0 then null else now() - (g % 3600) * interval '1 second' end,
                  case when g % 6 = 0 then null else now() - (g % 3600) * interval '1 second' + interval '5 milliseconds' end,
                  now() + (g % 60) * interval '1 second'
           from generate_series($1::int, $1::int + $2::int - 1) g
           returning id, claimed_at, finished_at, status
         )
         insert into acta.executions (job_id, execution, claimed_at, finished_at, outcome, charged)
         select id, 1, claimed_at, finished_at, case status when 'failed' then 'failed_final' else 'cancelled' end, true
         from j where status in ('failed', 'cancelled')`,
        [done, n],
      );
    }
    await moveSucceeded(db);
    await db.query('vacuum analyze acta.jobs');
    await db.query('vacuum analyze acta.executions');
    await db.query('vacuum analyze acta.succeeded_jobs');
    const fillMs = performance.now() - f0;
    const { rows: one } = await db.query<{ id: string }>(`select id::text as id from acta.jobs where status = 'failed' order by id desc limit 1`);
    const dash = await startDashboard({ db, port: 0 });
    const pages: Record<string, string> = {
      overview: '/',
      jobs: '/jobs',
      'jobs?status=failed': '/jobs?status=failed',
      'jobs?definition=d3': '/jobs?definition=d3',
      job: `/jobs/${one[0].id}`,
      workers: '/workers',
    };
    const results: Record<string, { p50Ms: number; maxMs: number; bytes: number }> = {};
    for (const [label, path] of Object.entries(pages)) {
      const times: number[] = [];
      let bytes = 0;
      for (let i = 0; i < RENDERS + 2; i++) {
        const t0 = performance.now();
        const res = await fetch(`${dash.url}${path}`);
        const body = await res.text();
        if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status}`);
        if (i >= 2) times.push(performance.now() - t0); // the first two warm the statements' plans
        bytes = body.length;
      }
      results[label] = { p50Ms: round(percentile(times, 50)), maxMs: round(Math.max(...times)), bytes };
    }
    await dash.close();
    const out = { rows: ROWS, renders: RENDERS, fillS: round(fillMs / 1000), pages: results };
    if (process.argv.includes('--json')) console.log(JSON.stringify(out));
    else {
      console.log(`dashboard pages over ${ROWS.toLocaleString('en')} jobs (filled in ${out.fillS} s), ${RENDERS} renders each after 2 warm-ups:`);
      for (const [label, r] of Object.entries(results)) console.log(`  ${label.padEnd(22)} p50 ${r.p50Ms} ms, max ${r.maxMs} ms, ${r.bytes.toLocaleString('en')} bytes`);
    }
  } finally {
    await db.close();
    await admin.dropDatabase(name);
    await admin.close();
  }
}

void main().catch((err) => {
  console.error(err);
  process.exit(1);
});
