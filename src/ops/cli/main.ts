import * as fs from 'node:fs';
import { scheduleCommands } from './schedule';
import * as path from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { type Client, createClient } from '../../client/client';
import { HEARTBEAT_INTERVAL_RANGE_MS, MAX_EXECUTORS, MAX_NAME_BYTES, MAX_TIMER_MS } from '../../config';
import { INT4_MAX } from '../../db/types';
import { connect, describeTarget } from '../../db/connect';
import { type Db, withDeadline } from '../../db/Db';
import { cancelJob } from '../../db/jobs';
import { assertMigrated, loadFunctionsLock, migrate, sqlDir } from '../../db/migrator';
import type { Definition } from '../../definition';
import { ActaError, DbUnansweredError, EnqueueRefusedError, SchemaNotMigratedError } from '../../errors';
import { refusedError } from '../../policies/enqueueRule';
import { createLogger } from '../../logger';
import { createWorker } from '../../worker/worker';
import { raceTimeout } from '../../worker/shutdown';
import { isUnreachableError } from '../../db/transient';
import { asyncScheduler } from 'rxjs';
import { redisChannel } from '../../worker/wakeups';
import { registerAdminCommands } from './admin';
import { registerJobCommand } from './job';
import { int, name } from './args';
import { instantOption } from './instant';
import { jsonArgument } from './jsonArgument';
import { registerPublishCommand } from './publish';
import { registerSignalCommand } from './signal';
import { registerDashboardCommand } from './dashboard';
import { installWorkerSignals } from './workerSignals';
import { deadlineOption, MIGRATE_DEADLINE_S, SQL_DEADLINE_S, withinDeadline } from './deadline';

/**
 * An option parser for the Redis address, as ioredis takes it (`redis://host:6379`, `host:port`, a
 * socket path): refuses an empty one (an unset `$REDIS_URL`: ioredis would use 127.0.0.1:6379)
 * and one ioredis would not parse, naming the flag, before anything connects or is written
 * (test/cli.test.ts, "an option out of range is refused, naming the flag"). ioredis reads digits
 * as a port, a leading "/" as a socket path, and anything else as a URL, `redis://` prefixed when
 * it has no scheme (`127.0.0.1:abc` then throws "Invalid URL").
 */
function redisAddress(value: string): string {
  const address = value.trim();
  if (address === '') throw new InvalidArgumentError('must not be empty.');
  if (/^\d+$/.test(address) || (address.startsWith('/') && !address.startsWith('//'))) return address;
  const url = /^rediss?:\/\//i.test(address) ? address : address.startsWith('//') ? `redis:${address}` : `redis://${address}`;
  if (!URL.canParse(url)) throw new InvalidArgumentError('is not a valid URL.');
  return address;
}

/** Loads the definitions a module exports: `definitions`, a default array, or every exported definition. */
export function loadDefinitions(modulePath: string): Definition[] {
  const resolved = path.resolve(modulePath);
  if (/\.[cm]?ts$/.test(resolved)) {
    throw new ActaError('ACTA_MODULE_NOT_JS', `${modulePath} is TypeScript: compile it and give the .js file (acta worker loads CommonJS JavaScript)`);
  }
  let mod: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    mod = require(resolved) as Record<string, unknown>;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    // Only when the module itself is missing: Node's message names the missing module on its first
    // line, then lists the requiring files, so a module that exists but requires a package that
    // is not installed would otherwise be reported as missing itself (test/cli.test.ts, "`acta
    // worker` with a missing module or a TypeScript file says so plainly").
    if (e.code === 'MODULE_NOT_FOUND' && e.message.split('\n')[0].includes(`'${resolved}'`)) {
      throw new ActaError('ACTA_MODULE_NOT_FOUND', `no module at ${resolved}`);
    }
    // The module's own failure (a setting it lacks, a bug of its own) reads as the module's, not
    // acta's (test/cli.test.ts, "`acta worker` with a missing module ... says so plainly").
    throw new Error(`loading ${resolved} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  const isDefinition = (v: unknown): v is Definition =>
    !!v && typeof v === 'object' && typeof (v as Definition).name === 'string' && typeof (v as Definition).handler === 'function';
  const candidates = [mod.definitions, mod.default, (mod.default as Record<string, unknown> | undefined)?.definitions];
  for (const c of candidates) if (Array.isArray(c) && c.every(isDefinition) && c.length > 0) return c;
  const found = Object.values(mod).filter(isDefinition);
  if (found.length === 0) throw new ActaError('ACTA_NO_DEFINITIONS', `${resolved} exports no job definitions ({ name, handler })`);
  return found;
}

async function withDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await connect();
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * How long a client command's statement may go unanswered, ms: then its connection is destroyed and
 * the command fails, naming the database (DbUnansweredError), where a silent network held it for
 * good (test/faults/partition.test.ts). Each statement is an index read or a batch of at most 500
 * rows; `acta sql` and `acta migrate` have their own, longer, `--deadline` (deadline.ts).
 */
export const CLI_STATEMENT_DEADLINE_MS = 30_000;

/**
 * Runs `fn` with a client of `namespace` on the command's database, after checking its schema
 * (a clear "run acta migrate" instead of a missing-schema error); each statement within
 * CLI_STATEMENT_DEADLINE_MS.
 */
function withClient<T>(namespace: string, fn: (client: Client, db: Db) => Promise<T>, definitions?: Definition[]): Promise<T> {
  return withDb(async (base) => {
    const db = withDeadline(base, CLI_STATEMENT_DEADLINE_MS);
    await assertMigrated(db);
    return fn(createClient({ db, namespace, definitions }), db);
  });
}

/**
 * Publishes one Redis wakeup for `namespace` (what redisWakeups listens for) and closes the
 * connection. The job is already committed: a failure is reported on stderr, with exit code 1,
 * and the job waits for a worker's safety poll instead (test/cli.test.ts).
 */
async function publishWakeup(url: string, namespace: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 2_000, retryStrategy: () => null });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    await redis.publish(redisChannel(namespace), '1');
  } catch (err) {
    process.exitCode = 1;
    console.error(`acta: the job is enqueued, but the Redis wakeup failed (${(err as Error).message}); workers find it at their next safety poll`);
  } finally {
    redis.disconnect();
  }
}

/** "acta 0.1.0 (SQL functions revision 7)": the package.json beside sql/, and sql/functions.lock. */
function versionLine(): string {
  const root = path.dirname(sqlDir());
  const { version } = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { version: string };
  return `acta ${version} (SQL functions revision ${loadFunctionsLock().revision})`;
}

export function program(): Command {
  const cli = new Command('acta').description('acta: a durable job queue on PostgreSQL (DATABASE_URL) or embedded PGlite (ACTA_DATA_DIR, default ./.acta/data)');
  cli.version(versionLine(), '-V, --version', 'the package version and the revision of its SQL functions (sql/functions.lock)');

  cli
    .command('migrate')
    .description('apply the schema (idempotent; safe to run from many processes at once)')
    .addOption(deadlineOption('the whole migrate (one transaction)', MIGRATE_DEADLINE_S))
    .action(async (opts: { deadline: number }) => {
      const advice = `it commits all or nothing, so acta migrate again is safe; a long migration needs a larger --deadline <s> (now ${opts.deadline})`;
      const applied = await withDb((db) => withinDeadline(db, opts.deadline, advice, migrate));
      console.log(`${applied.length ? `applied ${applied.length}: ${applied.join(', ')}` : 'schema up to date'} (${describeTarget()})`);
    });

  cli
    .command('enqueue <definition> <json>')
    .description('enqueue one job; prints its id. Refuses a definition name no worker has declared in the namespace (workers declare theirs when they start), listing those declared; --force enqueues it anyway')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--run-at <iso>', 'when the job becomes due: an ISO 8601 date-time with its offset (2026-12-01T09:00:00Z)', instantOption)
    .option('--priority <n>', 'higher runs first', int(-INT4_MAX, INT4_MAX))
    .option('--max-attempts <n>', "attempts before Failed (default: the definition's, else 25)", int(1, INT4_MAX))
    .option('--idempotency-key <key>', 'at most one job per key')
    .option('--definitions <module>', "the worker's module: refuse a name it does not define (checked instead of the names workers declared), and compute the job's policy keys with its definition")
    .option('--concurrency-key <key>', "the job's concurrency key (else computed with --definitions)")
    .option('--rate-key <key>', "the job's rate key (else computed with --definitions)")
    .option('--lane <key>', "the job's lane (else computed with --definitions)")
    .addOption(new Option('--force', 'enqueue a definition name no worker has declared in the namespace (e.g. its worker has not started yet)').conflicts('definitions'))
    .option('--redis <url>', 'also wake workers that take Redis wakeups (acta worker --redis), e.g. behind a pooler where NOTIFY does not reach them', redisAddress)
    .action(async (definition: string, json: string, opts: { namespace: string; runAt?: Date; priority?: number; maxAttempts?: number; idempotencyKey?: string; definitions?: string; force?: boolean; redis?: string; concurrencyKey?: string; rateKey?: string; lane?: string }) => {
      const payload = jsonArgument('payload', json);
      const runAt = opts.runAt;
      const definitions = opts.definitions ? loadDefinitions(opts.definitions) : undefined;
      const result = await withClient(
        opts.namespace,
        async (client) => {
          // The module given is the list to check (the client refuses other names), else what the
          // namespace's workers declared: the library's rule (src/policies/enqueueRule.ts), in the
          // command line's words (test/cli.test.ts).
          const { concurrencyKey, rateKey, lane } = opts;
          try {
            return await client.enqueue(definition, payload, { runAt, priority: opts.priority, maxAttempts: opts.maxAttempts, idempotencyKey: opts.idempotencyKey, concurrencyKey, rateKey, lane, force: opts.force });
          } catch (err) {
            throw err instanceof EnqueueRefusedError ? refusedError(err.refusal, 'cli') : err;
          }
        },
        definitions,
      );
      console.log(JSON.stringify(result));
      if (opts.redis !== undefined) await publishWakeup(opts.redis, opts.namespace);
    });

  registerJobCommand(cli, (namespace, fn) => withClient(namespace, fn));

  cli
    .command('cancel <id>')
    .description(
      'cancel a job (client.cancel): a Ready one at once, prints {"cancelled":true}; a running one through its worker, prints {"cancelRequested":true} (its handler is aborted and it ends Cancelled unless it succeeds first; `acta job <id>` shows it); a parent\'s unfinished child jobs are cancelled with it, recursively (docs/workflows.md); exits 1 saying why when it has finished',
    )
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .action(async (id: string, opts: { namespace: string }) => {
      const answer = await withClient(opts.namespace, async (client, db) => {
        // getJob checks the id (ConfigError) and finds the job; acta.cancel_job's answer says
        // which cancel it was (the job may have ended Cancelled by the time it is read again).
        if ((await client.getJob(id)) === null) return { why: `no job ${id} in namespace "${opts.namespace}"` };
        const done = await cancelJob(db, opts.namespace, BigInt(id).toString());
        if (done === 'cancelled') return { cancelled: true };
        if (done === 'requested') return { cancelRequested: true };
        return { why: `job ${id} is ${(await client.getJob(id))?.status ?? 'gone'}: it has finished` };
      });
      if ('why' in answer) throw new ActaError('ACTA_NOT_CANCELLED', answer.why as string);
      console.log(JSON.stringify(answer));
    });

  registerAdminCommands(cli, (namespace, fn) => withClient(namespace, (client, db) => fn(client, db)));
  registerSignalCommand(cli, (namespace, fn) => withClient(namespace, (client) => fn(client)));
  registerPublishCommand(cli, (namespace, fn) => withClient(namespace, (client) => fn(client)));
  registerDashboardCommand(cli);

  cli
    .command('sql <statement>')
    .description('run SQL on the database (the way to look into embedded PGlite, which psql cannot reach); prints each row of the last statement as a JSON line')
    .addOption(deadlineOption('the statement', SQL_DEADLINE_S))
    .action(async (statement: string, opts: { deadline: number }) => {
      const advice = `a longer statement needs a larger --deadline <s> (now ${opts.deadline})`;
      const { rows } = await withDb((db) => withinDeadline(db, opts.deadline, advice, (d) => d.query(statement)));
      for (const row of rows) console.log(JSON.stringify(row));
    });

  cli
    .command('worker <module>')
    .description('run a worker for the job definitions a module exports, until SIGINT/SIGTERM')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--executors <n>', 'executor count N (default 4 per core, 8..64)', int(1, MAX_EXECUTORS))
    .option('--heartbeat <ms>', 'heartbeat interval H in ms (default 45000)', int(HEARTBEAT_INTERVAL_RANGE_MS.min, HEARTBEAT_INTERVAL_RANGE_MS.max))
    .option('--safety-poll <ms>', 'longest idle sleep in ms (default 1000)', int(1, MAX_TIMER_MS))
    .option('--shutdown-timeout <ms>', 'wait for running handlers at stop, ms (default 10000)', int(0, MAX_TIMER_MS))
    .option('--start-timeout <ms>', 'give up (exit 1) when the database is not reached within this many ms of the start (default 30000)', int(1, MAX_TIMER_MS))
    .option('--metrics-port <port>', 'serve Prometheus metrics at /metrics', int(0, 65_535))
    .option('--redis <url>', 'also take wakeups from Redis pub/sub (what ioredis takes: redis://host:6379, host:port, a socket path)', redisAddress)
    .option('--no-listen', 'do not LISTEN for NOTIFY wakeups')
    .option('--build <id>', 'the build this worker runs (a version, a commit), declared with its policies: while live builds disagree, the strictest concurrency and rate limits apply (docs/policies.md)', name(MAX_NAME_BYTES))
    .option('--retention', 'declare sys.retention: delete finished jobs past their age every minute (succeeded and cancelled 1 day, failed 7 days; docs/retention.md)')
    .option('--alerts', 'declare sys.alerts: evaluate the alert rules every 30 s (docs/alerts.md)')
    .option('--on-alert <definition>', 'with --alerts: a definition that gets a job per alert raised and resolved', name(MAX_NAME_BYTES))
    .option('--outbox', 'declare sys.outbox: fan published events out to their subscribers at each publish and every 10 s (docs/outbox.md)')
    .action(async (modulePath: string, opts: Record<string, unknown>) => {
      if (opts.onAlert !== undefined && opts.alerts !== true) throw new ActaError('ACTA_CLI_USAGE', '--on-alert goes with --alerts (sys.alerts raises the alerts it is told of)');
      const logger = createLogger();
      const signals = installWorkerSignals(logger);
      const definitions = loadDefinitions(modulePath);
      const db = await connect();
      // A signal during the module's loading or the connect: nothing was claimed; close and exit 0.
      const endStart = async () => {
        signals.stopped();
        await raceTimeout(db.close().catch(() => undefined), CLOSE_AFTER_FAILURE_MS, asyncScheduler);
        process.exit(0);
      };
      if (signals.stopping) return endStart();
      let redis: { disconnect(): void } | undefined;
      if (typeof opts.redis === 'string') {
        const { Redis } = await import('ioredis');
        const client = new Redis(opts.redis);
        // The worker subscribes on a duplicate, which logs connection failures; without a listener
        // this one would print each raw to stderr.
        client.on('error', () => undefined);
        redis = client;
      }
      let worker: ReturnType<typeof createWorker>;
      try {
        worker = createWorker({
          db,
          definitions,
          namespace: opts.namespace as string,
          executors: opts.executors as number | undefined,
          heartbeatIntervalMs: opts.heartbeat as number | undefined,
          safetyPollMs: opts.safetyPoll as number | undefined,
          shutdownTimeoutMs: opts.shutdownTimeout as number | undefined,
          startTimeoutMs: opts.startTimeout as number | undefined,
          metricsPort: opts.metricsPort as number | undefined,
          listen: opts.listen as boolean,
          redis: redis as never,
          logger,
          build: opts.build as string | undefined,
          retention: opts.retention === true,
          alerts: opts.alerts === true ? (typeof opts.onAlert === 'string' ? { onAlert: opts.onAlert } : true) : false,
          outbox: opts.outbox === true,
        });
      } catch (err) {
        // Settings the parsers above did not refuse (ConfigError): nothing is left open.
        redis?.disconnect();
        await db.close().catch(() => undefined);
        throw err;
      }
      if (signals.stopping) {
        redis?.disconnect();
        return endStart();
      }
      signals.attach(worker);
      try {
        await worker.start();
      } catch (err) {
        // e.g. the schema is not migrated, or the database not reached (StartTimeoutError): say so
        // and exit 1 at once. The close is bounded: a connect still in flight to a server that does
        // not answer would hold it (and the process) until its connect timeout
        // (test/faults/unresponsive.test.ts).
        redis?.disconnect(); // not quit(): with Redis down, a QUIT would wait in ioredis' offline queue
        await raceTimeout(db.close().catch(() => undefined), CLOSE_AFTER_FAILURE_MS, asyncScheduler);
        printFailure(err);
        process.exit(1);
      }
      // A signal during start() (e.g. while the database is unreachable) already stopped it.
      if (!signals.stopping) logger.info({ target: describeTarget() }, 'acta worker running');
      try {
        await worker.done;
        signals.stopped();
        redis?.disconnect(); // not quit(): with Redis down, a QUIT would wait in ioredis' offline queue
        // Bounded: everything is written by now, and a connect in flight to a server that does not
        // answer would hold the close until its connect timeout.
        await raceTimeout(db.close(), CLOSE_AFTER_FAILURE_MS, asyncScheduler);
        process.exit(0);
      } catch (err) {
        logger.error({ err }, 'worker stopped on a fatal error: exiting 1 for the supervisor to restart it');
        process.exit(1);
      }
    });

  scheduleCommands(cli, (namespace, fn) => withClient(namespace, fn));
  return cli;
}

/**
 * Runs the command line. A failure prints `acta: <message>` on stderr (the stack too when
 * ACTA_DEBUG is set) and sets exit code 1: bad input (a payload that is not JSON, an unmigrated
 * schema, a module without definitions) reads as a message, not a stack trace.
 */
export async function main(argv = process.argv): Promise<void> {
  try {
    await program().parseAsync(argv);
  } catch (err) {
    printFailure(err);
    process.exitCode = 1;
  }
}

/** How long `acta worker` waits for its Db to close before it exits anyway (1 after a failed start, 0 after a stop), ms. */
const CLOSE_AFTER_FAILURE_MS = 1_000;

/**
 * Prints a failure as `acta: <message>` (the error itself with ACTA_DEBUG). A database that was not
 * reached is named (password masked), so the operator sees which one the command tried
 * (test/faults/unresponsive.test.ts).
 */
function printFailure(err: unknown): void {
  const expected = err instanceof ActaError || err instanceof CommanderError;
  if (process.env.ACTA_DEBUG || !(err instanceof Error)) return console.error(err);
  // An embedded folder's holder that did not answer is named by the error itself, with what to do.
  const holder = err instanceof DbUnansweredError && err.holder !== undefined;
  // A schema not migrated is named too: with DATABASE_URL unset (a new shell), the command read an
  // embedded folder of the current one, and "run acta migrate" would migrate that (test/cli.test.ts).
  // A statement the server was still running at the deadline reached it (deadline.ts).
  const running = err instanceof DbUnansweredError && err.stillRunning === true;
  const where =
    (!expected || err instanceof DbUnansweredError) && !holder && !running && isUnreachableError(err)
      ? ` (the database ${describeTarget()} was not reached: is the server up and reachable, and DATABASE_URL right?)`
      : err instanceof SchemaNotMigratedError || running
        ? ` (the database: ${describeTarget()})`
        : '';
  console.error(`acta: ${err.message}${where}${expected ? '' : ' (set ACTA_DEBUG=1 for the stack)'}`);
}

if (require.main === module) void main();
