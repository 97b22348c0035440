/**
 * One worker process of the benchmark. Started by the orchestrator (bench/run.ts) with a JSON
 * ChildConfig as argv[2] and an IPC channel. It loads and prepares its system, says `ready`,
 * starts consuming on `go` (the start call is inside the measured time, for every system), and
 * stops gracefully on `stop`. Handlers are no-ops that count themselves (answered on `count`); in
 * latency mode each handler also tells the orchestrator which job started (the orchestrator takes
 * both timestamps on its own clock).
 */
import type { ChildConfig, FromChild, ToChild } from './common';
import { JOB_NAME, kindOf, monotonicMs, PGBOSS_QUEUE, SETTINGS } from './common';
import { bullmq, graphileWorker, pgBoss } from './peers';

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;

function send(message: FromChild): void {
  process.send?.(message);
}

interface Running {
  /** Starts consuming. */
  go(): Promise<void>;
  /** Stops gracefully and closes every connection. */
  stop(): Promise<void>;
}

type JobHandler = (payload: unknown) => void;

/** Handlers run so far; the orchestrator asks (`count`) before it polls the database (bench/scenarios.ts, measureDrain). */
let handled = 0;
/** Warm drains: after `arm`, the first handler's start on the shared monotonic clock (bench/scenarios.ts, measureWarmDrain). */
let armed = false;
let firstAfterArmMs: number | undefined;
const handler: JobHandler =
  config.mode === 'latency'
    ? (payload) => {
        handled++;
        const k = (payload as { k?: unknown } | null)?.k;
        if (typeof k === 'number') send({ type: 'job', k });
      }
    : () => {
        handled++;
        if (armed) {
          armed = false;
          firstAfterArmMs = monotonicMs();
        }
      };

async function prepareActa(): Promise<Running> {
  const { createPgDb, createWorker, createLogger, defineJob } = await import('../src');
  const db = createPgDb({ connectionString: config.url, max: config.pool });
  const settings = SETTINGS[config.system as 'acta-default' | 'acta-best' | 'acta-zero'];
  const noop = defineJob({
    name: JOB_NAME,
    // Keyed drains: the limit is the namespace's policy from this worker's start; the keys come
    // with the jobs (enqueued with `concurrencyKey`), so this function is not called here.
    ...(config.concurrencyLimit !== undefined ? { concurrency: { key: (p: unknown) => String((p as { key?: unknown }).key), limit: config.concurrencyLimit } } : {}),
    ...(config.rateLimit !== undefined ? { rate: { key: (p: unknown) => String((p as { key?: unknown }).key), ...config.rateLimit } } : {}),
    handler: (payload) => {
      handler(payload);
    },
  });
  const worker = createWorker({
    db,
    definitions: [noop],
    executors: config.executors ?? settings.executors,
    ...(config.system === 'acta-zero' ? { retention: { succeededMs: 0 } } : {}),
    logger: createLogger({ level: process.env.ACTA_LOG_LEVEL ?? 'warn' }),
  });
  return {
    go: () => worker.start(),
    async stop() {
      await worker.stop();
      await db.close();
    },
  };
}

async function prepareGraphile(): Promise<Running> {
  const { run, Logger } = await graphileWorker();
  const logger = new Logger(() => (level: string, message: string) => {
    if (level === 'error' || level === 'warning') console.error(`graphile ${level}: ${message}`);
  });
  const worker: Record<string, unknown> =
    config.system === 'graphile-perf'
      ? {
          connectionString: config.url,
          maxPoolSize: config.pool,
          concurrentJobs: SETTINGS['graphile-perf'].concurrentJobs,
          localQueue: { size: SETTINGS['graphile-perf'].localQueueSize },
          completeJobBatchDelay: 0,
          failJobBatchDelay: 0,
        }
      : { connectionString: config.url, maxPoolSize: config.pool };
  let runner: Awaited<ReturnType<typeof run>> | undefined;
  return {
    async go() {
      runner = await run({
        noHandleSignals: true,
        logger,
        taskList: {
          [JOB_NAME]: async (payload: unknown) => {
            handler(payload);
          },
        },
        preset: { worker },
      });
    },
    async stop() {
      await runner?.stop();
    },
  };
}

async function preparePgBoss(): Promise<Running> {
  const { PgBoss } = await pgBoss();
  const settings = SETTINGS['pgboss-best'];
  const boss = new PgBoss({ connectionString: config.url, max: config.pool, useListenNotify: true });
  boss.on('error', (err: Error) => console.error(`pg-boss error: ${err.message}`));
  await boss.start();
  return {
    async go() {
      await boss.work(
        PGBOSS_QUEUE,
        {
          batchSize: settings.batchSize,
          burstWhenBatchFull: true,
          localConcurrency: settings.localConcurrency,
          pollingIntervalSeconds: 0.5,
        },
        async (jobs: { data: unknown }[]) => {
          for (const job of jobs) handler(job.data);
        },
      );
    },
    async stop() {
      await boss.stop({ graceful: true, close: true, timeout: 10_000 });
    },
  };
}

async function prepareBullmq(): Promise<Running> {
  const { Worker } = await bullmq();
  const url = new URL(config.redisUrl ?? 'redis://127.0.0.1:6379');
  const connection = {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0,
    maxRetriesPerRequest: null,
  };
  const worker = new Worker(
    JOB_NAME,
    async (job: { data: unknown }) => {
      handler(job.data);
    },
    { connection, prefix: config.redisPrefix, concurrency: SETTINGS.bullmq.concurrency, autorun: false },
  );
  worker.on('error', (err: Error) => console.error(`bullmq error: ${err.message}`));
  await worker.waitUntilReady();
  return {
    async go() {
      void worker.run().catch((err: Error) => console.error(`bullmq run: ${err.message}`));
    },
    async stop() {
      await worker.close();
    },
  };
}

async function main(): Promise<void> {
  const kind = kindOf(config.system);
  const running =
    kind === 'acta' ? await prepareActa() : kind === 'graphile' ? await prepareGraphile() : kind === 'pgboss' ? await preparePgBoss() : await prepareBullmq();
  let stopping = false;
  process.on('message', (message: ToChild) => {
    if (message.type === 'ping') send({ type: 'pong', id: message.id });
    else if (message.type === 'count') send({ type: 'counted', id: message.id, handled, firstAfterArmMs });
    else if (message.type === 'arm') {
      armed = true;
      firstAfterArmMs = undefined;
      send({ type: 'armed', id: message.id });
    }
    else if (message.type === 'go') {
      const t0 = performance.now();
      running.go().then(
        () => send({ type: 'started', ms: performance.now() - t0 }),
        (err: unknown) => fail(err),
      );
    } else if (message.type === 'stop' && !stopping) {
      stopping = true;
      running.stop().then(
        () => {
          send({ type: 'stopped' });
          process.disconnect?.();
          process.exit(0);
        },
        (err: unknown) => fail(err),
      );
    }
  });
  // The orchestrator went away: do not linger.
  process.on('disconnect', () => process.exit(stopping ? 0 : 3));
  send({ type: 'ready' });
}

function fail(err: unknown): void {
  const message = err instanceof Error ? `${err.message}\n${err.stack ?? ''}` : String(err);
  send({ type: 'error', message });
  console.error(`bench child ${config.system}: ${message}`);
  setTimeout(() => process.exit(2), 100);
}

main().catch(fail);
