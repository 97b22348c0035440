/**
 * sys.retention at scale (bench/README.md, "Retention"): N finished rows past their age, then two
 * drains of D jobs by one in-process worker at 128 executors: the first alone, the second with a
 * retention pass running beside it. Reports each drain's throughput and claim round-trip p50/p99,
 * and the pass's batches (count, timeouts, the slowest against its timeout) and whether it reached
 * the end. A benchmark row, not a test: nothing here asserts a time.
 *
 *   node dist/bench/retention.js [--rows 5000000] [--jobs 20000] [--batch 1000] [--timeout-ms 1000] [--json]
 *
 * Default --rows 200000 (a quick run); the proof is --rows 5000000. On BENCH_DATABASE_URL's
 * server (default postgres://postgres@127.0.0.1:5432/postgres), in a database of its own, dropped after.
 */
import { randomBytes } from 'node:crypto';
import { createClient, createPgDb, createWorker, defineJob, migrate } from '../src';
import type { Db } from '../src/db/Db';
import { type Ledger, sqlLedger } from '../src/ledger';
import { retentionSettings, runRetentionPass, type RetentionPassResult } from '../src/recurring/retention';
import { Admin, moveSucceeded, withDatabase } from './pg';
import { percentile } from './stats';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : Number(process.argv[i + 1]);
};
const ROWS = arg('rows', 200_000);
const JOBS = arg('jobs', 20_000);
const BATCH = arg('batch', 1_000);
const TIMEOUT_MS = arg('timeout-ms', 1_000);
const NS = 'default';
const DAY_MS = 86_400_000;
const round = (ms: number) => Math.round(ms * 10) / 10;

/** `db` whose claim calls are timed into `claims` (ms per round trip). */
function timedClaims(db: Db, claims: number[]): Db {
  const prepared = db.prepared?.bind(db);
  if (!prepared) return db;
  return {
    ...db,
    kind: db.kind,
    query: db.query.bind(db),
    transaction: db.transaction.bind(db),
    listen: db.listen.bind(db),
    close: db.close.bind(db),
    async prepared(name, text, params) {
      if (name !== 'acta_claim_jobs') return prepared(name, text, params);
      const t0 = performance.now();
      try {
        return await prepared(name, text, params);
      } finally {
        claims.push(performance.now() - t0);
      }
    },
  } as Db;
}

async function fill(db: Db): Promise<void> {
  const chunk = 250_000;
  for (let done = 0; done < ROWS; done += chunk) {
    const n = Math.min(chunk, ROWS - done);
    await db.query(
      `insert into acta.jobs (namespace, definition, payload, status, execution, attempts, claimed_at, finished_at)
       select $1, 'old', '{}', 'succeeded', 1, 1, now() - interval '3 days', now() - interval '2 days' - g * interval '1 millisecond'
       from generate_series(1, $2) g`,
      [NS, n],
    );
  }
  await moveSucceeded(db);
  await db.query('vacuum analyze acta.jobs');
  await db.query('vacuum analyze acta.succeeded_jobs');
}

interface Drain {
  jobsPerSec: number;
  claimP50Ms: number;
  claimP99Ms: number;
  claims: number;
}

async function drain(url: string, beside?: () => Promise<void>): Promise<Drain> {
  const claims: number[] = [];
  const db = timedClaims(createPgDb({ connectionString: url, max: 10 }), claims);
  // force: the worker that declares noop starts after the enqueue (the enqueue rule, docs/reference.md).
  const client = createClient({ db, namespace: NS, force: true });
  let ran = 0;
  const noop = defineJob({ name: 'noop', handler: () => void ran++ });
  for (let i = 0; i < JOBS; i += 5_000) {
    await client.enqueueMany(Array.from({ length: Math.min(5_000, JOBS - i) }, () => ({ definition: 'noop', payload: {} })));
  }
  const worker = createWorker({ db, definitions: [noop], executors: 128, namespace: NS, logger: (await import('pino')).default({ level: 'warn' }) });
  const t0 = performance.now();
  await worker.start();
  const side = beside?.();
  while (ran < JOBS) await new Promise((r) => setTimeout(r, 5));
  const ms = performance.now() - t0;
  await worker.stop();
  await side;
  await db.close();
  return { jobsPerSec: Math.round((JOBS / ms) * 1000), claimP50Ms: round(percentile(claims, 50)), claimP99Ms: round(percentile(claims, 99)), claims: claims.length };
}

/** The ledger with each prune batch timed into `batches` (ms). */
function timedLedger(ledger: Ledger, batches: number[]): Ledger {
  return {
    ...ledger,
    async pruneJobs(args) {
      const t0 = performance.now();
      try {
        return await ledger.pruneJobs(args);
      } finally {
        batches.push(performance.now() - t0);
      }
    },
  };
}

async function main(): Promise<void> {
  const server = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const admin = await Admin.open(server);
  const name = `acta_bench_retention_${randomBytes(4).toString('hex')}`;
  await admin.createDatabase(name);
  const url = withDatabase(server, name);
  try {
    const db = createPgDb({ connectionString: url, max: 2 });
    await migrate(db);
    const f0 = performance.now();
    await fill(db);
    const fillMs = performance.now() - f0;
    const alone = await drain(url);
    const batches: number[] = [];
    const passes: (RetentionPassResult & { ms: number })[] = [];
    const settings = { ...retentionSettings({ succeededMs: DAY_MS }), batchSize: BATCH, batchTimeoutMs: TIMEOUT_MS, passBudgetMs: 3_600_000 };
    const beside = await drain(url, async () => {
      const p0 = performance.now();
      const result = await runRetentionPass(timedLedger(sqlLedger(db), batches), NS, settings);
      passes.push({ ...result, ms: performance.now() - p0 });
    });
    const { rows } = await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where definition = 'old'`);
    await db.close();
    const pass = passes[0];
    const report = {
      rows: ROWS,
      jobs: JOBS,
      fillMs: Math.round(fillMs),
      drainAlone: alone,
      drainBesidePass: beside,
      pass: pass && {
        ...pass,
        ms: Math.round(pass.ms),
        batchTimeoutMs: TIMEOUT_MS,
        batchP50Ms: round(percentile(batches, 50)),
        batchP99Ms: round(percentile(batches, 99)),
        batchMaxMs: round(Math.max(...batches)),
        rowsPerSec: Math.round((pass.deleted / pass.ms) * 1000),
      },
      oldRowsLeft: Number(rows[0].n),
    };
    if (process.argv.includes('--json')) console.log(JSON.stringify(report));
    else console.log(JSON.stringify(report, null, 2));
  } catch (err) {
    console.error(err);
    process.exitCode = 1;
  } finally {
    await admin.dropDatabase(name);
    await admin.query('select 1');
    process.exit();
  }
}

void main();
