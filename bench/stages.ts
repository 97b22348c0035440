/**
 * The latency target (enqueue → handler start), split by stage for acta
 * (docs/proposals/benchmark-targets.md, section 1): where the time goes between an enqueue call and
 * its handler's start on an idle worker.
 *
 *   node dist/bench/stages.js [--jobs 200] [--warmup 200] [--spacing 15] [--executors N] [--json]
 *
 * The orchestrator (this process) makes a database of its own on BENCH_DATABASE_URL's server,
 * installs acta's schema, and forks itself as the worker process (`--child`): a `createWorker` at
 * its defaults (or `--executors`) with a no-op handler, whose claim calls are timed by wrapping its
 * Db's `prepared` (the claim is the named statement `acta_claim_jobs`, src/db/jobs.ts), and a
 * second connection LISTENing on acta's channel that notes when each NOTIFY reaches the process.
 * The orchestrator then enqueues one job at a time (`client.enqueue`), `--spacing` ms apart, after
 * `--warmup` untimed ones (a new connection's first calls compile and plan: bench/README.md). Every
 * stamp is on CLOCK_MONOTONIC (`monotonicMs`), one clock for both processes. Per job, ms after the
 * enqueue call began: `call` the call's own duration; `notify` the first NOTIFY at the worker
 * process after the call began; `claimSent` and `claimBack` the claim call that returned the job;
 * `handler` the handler's start. Prints p50 and p99 of each, or every sample with `--json`.
 * No timing is asserted anywhere (test/bench.test.ts runs it at a tiny size so it cannot rot).
 */
import { fork } from 'node:child_process';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { createClient, createLogger, createPgDb, createWorker, type Db, defineJob, migrate } from '../src';
import { NOTIFY_CHANNEL } from '../src/worker/wakeups';
import { JOB_NAME, monotonicMs } from './common';
import { Admin, withDatabase } from './pg';
import { percentile, sleep } from './stats';

/** One timed job's stages, ms after its enqueue call began (see the header). */
export interface StageSample {
  call: number;
  notify: number | null;
  claimSent: number;
  claimBack: number;
  handler: number;
}

type Event = { kind: 'notify'; at: number } | { kind: 'claim'; sent: number; back: number; ids: string[] } | { kind: 'handler'; at: number; k: number };
type FromWorker = { type: 'ready' } | { type: 'events'; events: Event[] };

const CLAIM_STATEMENT = 'acta_claim_jobs';

async function child(url: string, executors: number | undefined): Promise<void> {
  const base = createPgDb({ connectionString: url });
  const { prepared } = base;
  if (!prepared) throw new Error('a PostgreSQL Db runs its claim as a named statement (Db.prepared)');
  const events: Event[] = [];
  // A wrapper that watches statements wraps `prepared` (src/db/Db.ts); the claim is the one timed.
  const db: Db = {
    ...base,
    prepared: (async (name: string, text: string, params: unknown[]) => {
      if (name !== CLAIM_STATEMENT) return prepared(name, text, params);
      const sent = monotonicMs();
      const result = await prepared<{ job_id: string | null }>(name, text, params);
      events.push({ kind: 'claim', sent, back: monotonicMs(), ids: result.rows.map((r) => r.job_id).filter((id): id is string => id !== null) });
      return result;
    }) as Db['prepared'],
  };
  const listener = new Client({ connectionString: url, application_name: 'acta-bench-stages' });
  await listener.connect();
  listener.on('notification', () => events.push({ kind: 'notify', at: monotonicMs() }));
  await listener.query(`listen ${NOTIFY_CHANNEL}`);
  const noop = defineJob<{ k: number }>({
    name: JOB_NAME,
    handler: (payload) => {
      events.push({ kind: 'handler', at: monotonicMs(), k: payload.k });
    },
  });
  const worker = createWorker({ db, definitions: [noop], executors, logger: createLogger({ level: 'warn' }) });
  await worker.start();
  process.on('message', async (message: { type: string; lastK: number }) => {
    if (message.type !== 'dump') return;
    // The last job's handler may still be on its way: wait for it (10 s at most; a missing one is
    // reported by the orchestrator).
    for (let waited = 0; waited < 10_000 && !events.some((e) => e.kind === 'handler' && e.k === message.lastK); waited += 10) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    process.send?.({ type: 'events', events } satisfies FromWorker, () => {
      void worker
        .stop()
        .then(() => Promise.all([base.close(), listener.end()]))
        .finally(() => process.exit(0));
    });
  });
  process.send?.({ type: 'ready' } satisfies FromWorker);
}

/** Runs the measurement on a database of its own and returns every timed job's stages. */
export async function measureStages(options: { serverUrl: string; jobs: number; warmup: number; spacingMs: number; executors?: number }): Promise<StageSample[]> {
  const admin = await Admin.open(options.serverUrl);
  const database = `acta_bench_stages_${process.pid}_${Date.now()}`;
  await admin.createDatabase(database);
  const url = withDatabase(options.serverUrl, database);
  const db = createPgDb({ connectionString: url });
  try {
    await migrate(db); // before the worker process starts: it checks the schema as it starts
    return await timeJobs(db, url, options);
  } finally {
    await db.close();
    await admin.dropDatabase(database).catch(() => undefined);
    await admin.close();
  }
}

/** Forks the worker process, enqueues the jobs and splits each timed one into its stages. */
async function timeJobs(db: Db, url: string, options: { jobs: number; warmup: number; spacingMs: number; executors?: number }): Promise<StageSample[]> {
  const worker = fork(__filename, ['--child', url, ...(options.executors ? ['--executors', String(options.executors)] : [])], {
    stdio: ['ignore', 2, 2, 'ipc'], // the worker's log lines go to stderr: stdout is the report
  });
  const messages: FromWorker[] = [];
  let exitCode: number | null | undefined; // undefined while the worker process runs
  let wake: (() => void) | undefined;
  worker.on('message', (m: FromWorker) => {
    messages.push(m);
    wake?.();
  });
  worker.on('exit', (code) => {
    exitCode = code;
    wake?.();
  });
  const next = async (type: FromWorker['type']): Promise<FromWorker> => {
    for (;;) {
      const found = messages.find((m) => m.type === type);
      if (found) return found;
      if (exitCode !== undefined) throw new Error(`the worker process exited (${exitCode}) before '${type}'`);
      await new Promise<void>((resolve) => (wake = resolve));
    }
  };
  try {
    const client = createClient({ db });
    await next('ready');
    const calls: { k: number; began: number; ended: number; id: string }[] = [];
    for (let k = 0; k < options.warmup + options.jobs; k++) {
      const began = monotonicMs();
      const { id } = await client.enqueue(JOB_NAME, { k });
      calls.push({ k, began, ended: monotonicMs(), id: String(id) });
      await sleep(options.spacingMs);
    }
    worker.send({ type: 'dump', lastK: calls[calls.length - 1].k });
    const { events } = (await next('events')) as Extract<FromWorker, { type: 'events' }>;
    const samples: StageSample[] = [];
    for (const { k, began, ended, id } of calls.slice(options.warmup)) {
      const handler = events.find((e): e is Extract<Event, { kind: 'handler' }> => e.kind === 'handler' && e.k === k);
      const claim = events.find((e): e is Extract<Event, { kind: 'claim' }> => e.kind === 'claim' && e.ids.includes(id));
      if (!handler || !claim) throw new Error(`job ${k} (id ${id}): ${handler ? 'no claim returned it' : 'its handler never started'}`);
      const notice = events.find((e): e is Extract<Event, { kind: 'notify' }> => e.kind === 'notify' && e.at >= began);
      samples.push({
        call: ended - began,
        notify: notice ? notice.at - began : null,
        claimSent: claim.sent - began,
        claimBack: claim.back - began,
        handler: handler.at - began,
      });
    }
    return samples;
  } finally {
    if (exitCode === undefined) worker.kill();
  }
}

/** p50 and p99 of each stage, and of the claim's round trip, as a Markdown table. */
export function stagesTable(samples: StageSample[]): string {
  const rows: [string, (s: StageSample) => number | null][] = [
    ['enqueue call (its own duration)', (s) => s.call],
    ['NOTIFY at the worker process', (s) => s.notify],
    ['claim sent', (s) => s.claimSent],
    ['claim answered', (s) => s.claimBack],
    ['handler started', (s) => s.handler],
    ['claim round trip (answered - sent)', (s) => s.claimBack - s.claimSent],
  ];
  const lines = ['| stage (ms after the enqueue call began) | p50 | p99 |', '|---|---:|---:|'];
  for (const [name, pick] of rows) {
    const xs = samples.map(pick).filter((x): x is number => x !== null);
    lines.push(`| ${name} | ${percentile(xs, 50).toFixed(3)} | ${percentile(xs, 99).toFixed(3)} |`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      jobs: { type: 'string', default: '200' },
      warmup: { type: 'string', default: '200' },
      spacing: { type: 'string', default: '15' },
      executors: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const count = (name: string, text: string | undefined, least: number) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < least) throw new Error(`--${name} must be an integer of at least ${least}, got ${text}`);
    return n;
  };
  const executors = values.executors === undefined ? undefined : count('executors', values.executors, 1);
  if (values.child) return child(values.child, executors);
  const samples = await measureStages({
    serverUrl: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
    jobs: count('jobs', values.jobs, 1),
    warmup: count('warmup', values.warmup, 0),
    spacingMs: count('spacing', values.spacing, 0),
    executors,
  });
  console.log(values.json ? JSON.stringify(samples) : stagesTable(samples));
}

if (require.main === module) {
  main().catch((err: unknown) => {
    // A wrong option is a message, not a stack trace.
    console.error(err instanceof TypeError || !(err instanceof Error) || /^--/.test(err.message) ? `stages: ${err instanceof Error ? err.message : String(err)}` : (err.stack ?? err.message));
    process.exit(1);
  });
}
