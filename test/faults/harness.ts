/**
 * Shared pieces of the fault suite (test/faults/*.test.ts): a throwaway PostgreSQL server the
 * test owns (so it may stop, restart or kill it), worker processes of test/fixtures/fault-jobs.js
 * run through the real CLI, their pino log lines, the fixture's event file, and ledger queries.
 * Never touches the shared server.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Client } from 'pg';
import { enqueueJobs } from '../../src/db/jobs';
import { createPgDb } from '../../src/db/pgDb';
import { migrate } from '../../src/db/migrator';
import { withDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

export const ROOT = path.resolve(__dirname, '../..');
export const FIXTURE = 'test/fixtures/fault-jobs.js';

/** The handle test/helpers/server.mjs returns. */
interface ServerHandle {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  destroy(): Promise<void>;
}

/** A throwaway server with one migrated database, `acta_fault`. */
export interface FaultServer extends ServerHandle {
  /** URL of the migrated database. */
  dbUrl: string;
  /** One query on the database through a short-lived connection. */
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
}

export async function startFaultServer(): Promise<FaultServer> {
  const specifier = '../helpers/server.mjs'; // a variable: swc leaves this import() native (ESM)
  const { startServer } = (await import(specifier)) as { startServer: () => Promise<ServerHandle> };
  const server = await startServer();
  const admin = new Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query('create database acta_fault');
  } finally {
    await admin.end();
  }
  const dbUrl = withDatabase(server.url, 'acta_fault');
  const db = createPgDb({ connectionString: dbUrl, max: 1 });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  return {
    url: server.url,
    port: server.port,
    stop: () => server.stop(),
    start: () => server.start(),
    destroy: () => server.destroy(),
    dbUrl,
    async query<R>(text: string, params?: unknown[]) {
      const client = new Client({ connectionString: dbUrl });
      await client.connect();
      try {
        return (await client.query(text, params)).rows as R[];
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * The lifecycle every fault test file shares: beforeAll starts a server of the file's own,
 * afterAll kills every worker process still running and destroys the server. The returned
 * handle is filled in by beforeAll: use it inside tests and hooks.
 */
export function useFaultServer(): FaultServer {
  const server = {} as FaultServer;
  let started = false;
  beforeAll(async () => {
    Object.assign(server, await startFaultServer());
    started = true;
  });
  afterAll(async () => {
    await killAll();
    if (started) await server.destroy();
  });
  return server;
}

/** A pino JSON line of a worker process. */
export interface LogLine {
  level: number;
  msg: string;
  workerId?: string;
  [key: string]: unknown;
}

/** A worker process of the fixture, run through `node bin/acta.js worker`. */
export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly lines: LogLine[];
  /** Resolves when the process has exited, with its code (null when killed by a signal) and signal. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The worker identity it registered (from its "worker started" line). */
  workerId(): Promise<string>;
  /** Waits for a log line whose msg contains `text` (and that passes `where`). */
  waitForLog(text: string, timeoutMs?: number, where?: (line: LogLine) => boolean): Promise<LogLine>;
  /** The stdout/stderr text seen so far (for failure messages). */
  output(): string;
  kill(signal: NodeJS.Signals): void;
}

const spawned = new Set<ChildProcess>();

/**
 * Starts `acta worker <module>` (default: FIXTURE) with `args`, on `dbUrl`, its fixture events into
 * `events`; or, given `script`, `node <script> <args>` (a process that runs createWorker itself, for
 * options the CLI does not take).
 */
export function spawnWorker(options: { dbUrl: string; events: string; args?: string[]; env?: Record<string, string>; module?: string; script?: string }): WorkerProcess {
  const args = [...(options.script ? [options.script] : ['bin/acta.js', 'worker', options.module ?? FIXTURE]), ...(options.args ?? [])];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: options.dbUrl, FAULT_EVENTS: options.events, ACTA_LOG_LEVEL: 'debug', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  spawned.add(child);
  const lines: LogLine[] = [];
  let text = '';
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    partial += chunk;
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const part of parts) {
      try {
        lines.push(JSON.parse(part) as LogLine);
      } catch {
        /* not a log line */
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      spawned.delete(child);
      resolve({ code, signal });
    });
  });
  const waitForLog = (needle: string, timeoutMs = 30_000, where: (line: LogLine) => boolean = () => true) =>
    waitFor(() => lines.find((l) => typeof l.msg === 'string' && l.msg.includes(needle) && where(l)), `log "${needle}" from worker ${child.pid}:\n${text.slice(-3000)}`, timeoutMs, 50);
  return {
    child,
    pid: child.pid!,
    lines,
    exited,
    workerId: async () => (await waitForLog('worker started')).workerId as string,
    waitForLog,
    output: () => text,
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

/** Kills every worker process still running and removes the event files made so far (afterAll). */
export async function killAll(): Promise<void> {
  const waits = [...spawned].map((child) => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }));
  await Promise.all(waits);
  for (const dir of eventDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
}

const eventDirs: string[] = [];

/** A fresh event file for the fixture, in a folder killAll removes. */
export function eventsFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-fault-'));
  eventDirs.push(dir);
  return path.join(dir, 'events.jsonl');
}

export interface FixtureEvent {
  event: 'start' | 'done' | 'abort';
  jobId: string;
  execution: number;
  attempt: number;
  pid: number;
  reason?: string;
}

export function readEvents(file: string): FixtureEvent[] {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as FixtureEvent);
}

/** Enqueues `work` jobs in one call (into `namespace`, default "default"); returns their ids in order. */
export async function enqueueWork(server: FaultServer, payloads: object[], maxAttempts = 25, namespace = 'default'): Promise<string[]> {
  const results = await enqueueJobs({ query: async <R>(text: string, params?: unknown[]) => ({ rows: await server.query<R>(text, params) }) }, namespace, {
    definitions: payloads.map(() => 'work'),
    payloads: payloads.map((p) => JSON.stringify(p)),
    priorities: payloads.map(() => null),
    runAts: payloads.map(() => null),
    maxAttempts: payloads.map(() => maxAttempts),
    idempotencyKeys: payloads.map(() => null),
  });
  return results.map((r) => r.id as string);
}

// The readers below go through acta.all_jobs and acta.all_executions: a job without parent, watch,
// schedule or idempotency key leaves acta.jobs for acta.succeeded_jobs when it succeeds, and that
// row is its last attempt's record (it has no acta.executions row).
export interface JobRow {
  id: string;
  status: string;
  attempts: number;
  execution: number;
  started: boolean;
  error: { name?: string; message?: string } | null;
  result: unknown;
}

export async function jobs(server: FaultServer): Promise<JobRow[]> {
  return server.query<JobRow>('select id, status, attempts, execution, started, error, result from acta.all_jobs order by id');
}

export interface ExecutionRow {
  job_id: string;
  execution: number;
  worker_id: string | null;
  outcome: string;
  charged: boolean;
}

export async function executions(server: FaultServer): Promise<ExecutionRow[]> {
  return server.query<ExecutionRow>('select job_id, execution, worker_id, outcome, charged from acta.all_executions order by job_id, execution');
}

/** Waits until every listed job has the status. */
export function waitForStatus(server: FaultServer, ids: string[], status: string, what: string, timeoutMs = 45_000): Promise<true> {
  return waitFor(
    async () => {
      const rows = await server.query<{ n: string }>('select count(*) as n from acta.all_jobs where id = any($1) and status = $2', [ids, status]);
      return Number(rows[0].n) === ids.length || undefined;
    },
    what,
    timeoutMs,
    100,
  ) as Promise<true>;
}

/**
 * The ledger guarantees of the fault suite: every job Succeeded, with exactly one `succeeded`
 * executions row, and every attempt its row counted (execution 1..n) ended with exactly one
 * executions row: none lost, none written twice.
 */
export async function expectEachSucceededOnce(server: FaultServer, ids: string[]): Promise<void> {
  const rows = await jobs(server);
  const ex = await executions(server);
  if (process.env.ACTA_FAULT_DEBUG) {
    const outcomes: Record<string, number> = {};
    for (const e of ex) if (ids.includes(e.job_id)) outcomes[e.outcome] = (outcomes[e.outcome] ?? 0) + 1;
    console.log(`ledger of ${ids.length} jobs: executions by outcome ${JSON.stringify(outcomes)}`);
  }
  for (const id of ids) {
    const job = rows.find((r) => r.id === id);
    expect(job?.status).toBe('succeeded');
    const mine = ex.filter((e) => e.job_id === id);
    expect(mine.filter((e) => e.outcome === 'succeeded')).toHaveLength(1);
    // Every attempt the row counted (1..execution) ended with exactly one ledger row.
    expect(mine.map((e) => e.execution)).toEqual(Array.from({ length: job!.execution }, (_, i) => i + 1));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How often the worker's LISTEN connection has (re)connected (its debug line "LISTEN connected"). */
export function listenConnects(worker: WorkerProcess): number {
  return worker.lines.filter((l) => l.msg === 'LISTEN connected').length;
}

/**
 * NOTIFY wakeups work: `probes` jobs, enqueued one after another into idle workers whose safety
 * poll is `safetyPollMs`, each start (claim time minus enqueue time, both on the database clock)
 * well within a seventh of the safety poll. Polling alone would start a job uniformly within the
 * poll, so with two workers five probes pass by chance with probability below 0.2 %.
 */
export async function expectWakeupsWork(server: FaultServer, workers: WorkerProcess[], safetyPollMs: number, probes = 5): Promise<void> {
  // A failed claim backs off one safety poll, deaf to wakeups (DESIGN.md, "Claimer"): let every
  // back-off of the outage run out first.
  const lastFailure = Math.max(0, ...workers.flatMap((w) => w.lines.filter((l) => l.msg.startsWith('claim failed')).map((l) => Number(l.time))));
  const waitMs = lastFailure + safetyPollMs + 500 - Date.now();
  if (waitMs > 0) await sleep(waitMs);
  const limitMs = safetyPollMs / 7;
  for (let i = 0; i < probes; i++) {
    const [id] = await enqueueWork(server, [{ ms: 10 }]);
    await waitForStatus(server, [id], 'succeeded', `wakeup probe ${i + 1} to run`, 3 * safetyPollMs);
    const [row] = await server.query<{ ms: number }>(
      `select extract(epoch from (e.claimed_at - j.created_at)) * 1000 as ms
       from acta.all_jobs j join acta.all_executions e on e.job_id = j.id and e.execution = j.execution where j.id = $1`,
      [id],
    );
    if (process.env.ACTA_FAULT_DEBUG) console.log(`wakeup probe ${i + 1}: started ${Number(row.ms).toFixed(0)} ms after enqueue`);
    expect(Number(row.ms)).toBeLessThan(limitMs);
  }
}

/** The worker's exit, or 'still running' if it has not exited within `ms` (the timer is cleared either way). */
export async function exitWithin(worker: WorkerProcess, ms: number): Promise<{ code: number | null; signal: NodeJS.Signals | null } | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((resolve) => {
    timer = setTimeout(() => resolve('still running'), ms);
  });
  try {
    return await Promise.race([worker.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** One unlabelled metric of the worker serving /metrics on `port` (undefined when it is not there). */
export async function metric(port: number, name: string): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

/** Waits for `w` to exit and expects code 0; a failure shows the end of what the worker wrote (its error). */
export async function expectCleanExit(w: WorkerProcess): Promise<void> {
  const { code } = await w.exited;
  expect({ code, output: code === 0 ? '' : w.output().slice(-3_000) }).toEqual({ code: 0, output: '' });
}
