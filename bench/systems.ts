/**
 * The orchestrator's side of each system: a fresh store per measurement (a PostgreSQL database
 * copied from a per-kind template holding the installed schema, or a Redis key prefix), bulk and
 * single enqueue through the system's public API, a cheap "is work left?" poll, and a check that
 * every job completed.
 */
import { randomBytes } from 'node:crypto';
import { type Client, Pool } from 'pg';
import { type ChildConfig, JOB_NAME, kindOf, PGBOSS_QUEUE, type SystemKind, type SystemName } from './common';
import { bullmq, graphileWorker, pgBoss } from './peers';
import { type Admin, connectTo, withDatabase } from './pg';

export interface Poller {
  /** True while jobs are left (queued or running) of the `n` enqueued. */
  busy(n: number): Promise<boolean>;
  /** Queries made on the measured database (subtracted from its transaction count). */
  readonly polls: number;
  close(): Promise<void>;
}

/** One fresh store for one measurement. */
export interface Store {
  readonly system: SystemName;
  /** The PostgreSQL database (PG systems). */
  readonly database?: string;
  readonly url?: string;
  /** What a worker process of this store needs. */
  childConfig(): Omit<ChildConfig, 'mode' | 'pool'>;
  /** Opens the orchestrator's enqueue client. */
  openClient(): Promise<void>;
  enqueueBulk(n: number): Promise<void>;
  /** acta only (keyed drains): as enqueueBulk, job i with the enqueue option `concurrencyKey: keyOf(i)` and `key` in its payload. */
  enqueueKeyed?(n: number, keyOf: (i: number) => string): Promise<void>;
  /** acta only (rate-limited drains): as enqueueBulk, job i with the enqueue option `rateKey: keyOf(i)` and `key` in its payload. */
  enqueueRated?(n: number, keyOf: (i: number) => string): Promise<void>;
  enqueueOne(k: number): Promise<void>;
  closeClient(): Promise<void>;
  openPoller(): Promise<Poller>;
  /** Jobs completed successfully. */
  completed(n: number): Promise<number>;
  /** ANALYZE every table (PG systems). */
  analyze(): Promise<void>;
  /** VACUUM every table (PG systems): what autovacuum does in service (where it is on; this bench's server has it off). */
  vacuum(): Promise<void>;
  destroy(): Promise<void>;
}

const silentGraphileLogger = async () => {
  const { Logger } = await graphileWorker();
  return new Logger(() => (level: string, message: string) => {
    if (level === 'error') console.error(`graphile: ${message}`);
  });
};

/** A pg Client poller running one boolean query. */
async function sqlPoller(url: string, text: string, params: unknown[] = []): Promise<Poller> {
  const client = await connectTo(url, 'acta-bench-poller');
  let polls = 0;
  return {
    get polls() {
      return polls;
    },
    async busy() {
      polls++;
      const { rows } = await client.query<{ busy: boolean }>(text, params);
      return rows[0].busy;
    },
    close: () => client.end(),
  };
}

async function scalar(url: string, text: string): Promise<number> {
  const client = await connectTo(url);
  try {
    const { rows } = await client.query<{ n: string }>(text);
    return Number(rows[0].n);
  } finally {
    await client.end();
  }
}

export interface StoreFactoryOptions {
  admin: Admin;
  serverUrl: string;
  redisUrl: string;
  /** Unique per orchestrator run: names of databases, templates and Redis prefixes. */
  runId: string;
}

/** Creates stores; keeps one template database per kind, made on first use and dropped by close(). */
export class Stores {
  private readonly templates = new Map<SystemKind, Promise<string>>();
  private counter = 0;
  private readonly live = new Set<Store>();

  constructor(private readonly options: StoreFactoryOptions) {}

  static runId(): string {
    return randomBytes(3).toString('hex');
  }

  async create(system: SystemName): Promise<Store> {
    const kind = kindOf(system);
    const n = ++this.counter;
    let store: Store;
    if (kind === 'bullmq') store = await this.bullmq(system, `actabench:${this.options.runId}:${n}`);
    else {
      const template = await this.template(kind);
      const database = `bench_${this.options.runId}_${kind}_${n}`;
      await this.options.admin.createDatabase(database, template);
      const url = withDatabase(this.options.serverUrl, database);
      store = kind === 'acta' ? await this.acta(system, database, url) : kind === 'graphile' ? this.graphile(system, database, url) : this.pgboss(system, database, url);
    }
    this.live.add(store);
    const destroy = store.destroy.bind(store);
    store.destroy = async () => {
      this.live.delete(store);
      await destroy();
    };
    return store;
  }

  /** Drops every store still alive and the templates. */
  async close(): Promise<void> {
    for (const store of [...this.live]) await store.destroy().catch(() => undefined);
    for (const [, name] of this.templates) {
      const template = await name.catch(() => undefined);
      if (template) await this.options.admin.dropDatabase(template).catch(() => undefined);
    }
    this.templates.clear();
  }

  private template(kind: SystemKind): Promise<string> {
    let pending = this.templates.get(kind);
    if (!pending) {
      pending = this.makeTemplate(kind);
      this.templates.set(kind, pending);
    }
    return pending;
  }

  private async makeTemplate(kind: SystemKind): Promise<string> {
    const { admin, serverUrl, runId } = this.options;
    const name = `bench_${runId}_tpl_${kind}`;
    await admin.dropDatabase(name);
    await admin.createDatabase(name);
    const url = withDatabase(serverUrl, name);
    if (kind === 'acta') {
      const { createPgDb, migrate } = await import('../src');
      const db = createPgDb({ connectionString: url, max: 1 });
      try {
        await migrate(db);
      } finally {
        await db.close();
      }
    } else if (kind === 'graphile') {
      const { runMigrations } = await graphileWorker();
      await runMigrations({ connectionString: url, logger: await silentGraphileLogger() });
    } else if (kind === 'pgboss') {
      const { PgBoss } = await pgBoss();
      const boss = new PgBoss({ connectionString: url, max: 2, supervise: false, schedule: false, registerInstance: false });
      boss.on('error', () => undefined);
      await boss.start();
      await boss.createQueue(PGBOSS_QUEUE, { notify: true });
      await boss.stop({ graceful: false, close: true });
    }
    await admin.waitNoBackends(name);
    return name;
  }

  private async acta(system: SystemName, database: string, url: string): Promise<Store> {
    const { createPgDb, createClient, migrate } = await import('../src');
    // Functions edited since the template was made are (re)applied here; tables stay fresh.
    const setup = createPgDb({ connectionString: url, max: 1 });
    try {
      await migrate(setup);
    } finally {
      await setup.close();
    }
    let db: ReturnType<typeof createPgDb> | undefined;
    let client: ReturnType<typeof createClient> | undefined;
    return {
      system,
      database,
      url,
      childConfig: () => ({ system, url }),
      async openClient() {
        db = createPgDb({ connectionString: url, max: 2 });
        // No worker has declared the bench's definition when a scenario enqueues: forced past the
        // stored-definitions rule (its cost: docs/decisions/2026-12-05-enqueue-rule.md).
        client = createClient({ db, force: true });
        // Open the connection now, as every other system's openClient does (graphile-worker's
        // makeWorkerUtils, pg-boss's start, BullMQ's waitUntilReady): the timed calls measure the
        // enqueue, not the connection's set-up (23 ms on this VM: pgbench -C).
        await db.query('select 1');
      },
      async enqueueBulk(n) {
        await client!.enqueueMany(Array.from({ length: n }, (_, i) => ({ definition: JOB_NAME, payload: { n: i } })));
      },
      async enqueueKeyed(n, keyOf) {
        await client!.enqueueMany(Array.from({ length: n }, (_, i) => ({ definition: JOB_NAME, payload: { n: i, key: keyOf(i) }, concurrencyKey: keyOf(i) })));
      },
      async enqueueRated(n, keyOf) {
        await client!.enqueueMany(Array.from({ length: n }, (_, i) => ({ definition: JOB_NAME, payload: { n: i, key: keyOf(i) }, rateKey: keyOf(i) })));
      },
      async enqueueOne(k) {
        await client!.enqueue(JOB_NAME, { k });
      },
      async closeClient() {
        await db?.close();
        db = undefined;
      },
      // The bench's own jobs: under retention zero (acta-zero) the worker's sys.retention keeps an
      // armed fire Ready, and a succeeded job is gone, so it counts as done by its absence.
      openPoller: () =>
        sqlPoller(
          url,
          `select exists (select 1 from acta.jobs where status = 'ready' and definition = '${JOB_NAME}') or exists (select 1 from acta.jobs where status = 'executing' and definition = '${JOB_NAME}') as busy`,
        ),
      completed: (n) =>
        system === 'acta-zero'
          ? scalar(url, `select ${Number(n)} - count(*) filter (where status <> 'succeeded') as n from acta.jobs where definition = '${JOB_NAME}'`)
          : scalar(url, `select count(*) as n from acta.all_jobs where status = 'succeeded'`),
      analyze: () => exec(url, 'analyze'),
      vacuum: () => exec(url, 'vacuum'),
      destroy: () => this.options.admin.dropDatabase(database),
    };
  }

  private graphile(system: SystemName, database: string, url: string): Store {
    type Utils = Awaited<ReturnType<(typeof import('graphile-worker'))['makeWorkerUtils']>>;
    let utils: Utils | undefined;
    let pool: Pool | undefined;
    return {
      system,
      database,
      url,
      childConfig: () => ({ system, url }),
      async openClient() {
        const { makeWorkerUtils } = await graphileWorker();
        // Our own pool, with an error listener: a session ended by DROP DATABASE must not crash the orchestrator.
        pool = new Pool({ connectionString: url, max: 2 });
        pool.on('error', () => undefined);
        pool.on('connect', (client) => client.on('error', () => undefined));
        utils = await makeWorkerUtils({ pgPool: pool, logger: await silentGraphileLogger() });
      },
      async enqueueBulk(n) {
        await utils!.addJobs(Array.from({ length: n }, (_, i) => ({ identifier: JOB_NAME, payload: { n: i } })));
      },
      async enqueueOne(k) {
        await utils!.addJob(JOB_NAME, { k });
      },
      async closeClient() {
        await utils?.release();
        utils = undefined;
        await pool?.end();
        pool = undefined;
      },
      // A completed job is deleted; a failed one stays (with a later run_at).
      openPoller: () => sqlPoller(url, 'select exists (select 1 from graphile_worker._private_jobs) as busy'),
      completed: async (n) => n - (await scalar(url, 'select count(*) as n from graphile_worker._private_jobs')),
      analyze: () => exec(url, 'analyze'),
      vacuum: () => exec(url, 'vacuum'),
      destroy: () => this.options.admin.dropDatabase(database),
    };
  }

  private pgboss(system: SystemName, database: string, url: string): Store {
    type Boss = InstanceType<(typeof import('pg-boss'))['PgBoss']>;
    let boss: Boss | undefined;
    return {
      system,
      database,
      url,
      childConfig: () => ({ system, url }),
      async openClient() {
        const { PgBoss } = await pgBoss();
        boss = new PgBoss({ connectionString: url, max: 2, supervise: false, schedule: false, migrate: false, registerInstance: false });
        boss.on('error', (err: Error) => console.error(`pg-boss (client): ${err.message}`));
        await boss.start();
      },
      async enqueueBulk(n) {
        await boss!.insert(PGBOSS_QUEUE, Array.from({ length: n }, (_, i) => ({ data: { n: i } })));
      },
      async enqueueOne(k) {
        await boss!.send(PGBOSS_QUEUE, { k });
      },
      async closeClient() {
        await boss?.stop({ graceful: false, close: true });
        boss = undefined;
      },
      openPoller: () =>
        sqlPoller(url, `select exists (select 1 from pgboss.job where name = $1 and state in ('created', 'retry', 'active')) as busy`, [PGBOSS_QUEUE]),
      completed: () => scalar(url, `select count(*) as n from pgboss.job where name = '${PGBOSS_QUEUE}' and state = 'completed'`),
      analyze: () => exec(url, 'analyze'),
      vacuum: () => exec(url, 'vacuum'),
      destroy: () => this.options.admin.dropDatabase(database),
    };
  }

  private async bullmq(system: SystemName, prefix: string): Promise<Store> {
    const { Queue } = await bullmq();
    const { redisUrl } = this.options;
    const connection = redisConnection(redisUrl);
    const openQueue = () => new Queue(JOB_NAME, { connection, prefix });
    let queue: ReturnType<typeof openQueue> | undefined;
    return {
      system,
      childConfig: () => ({ system, redisUrl, redisPrefix: prefix }),
      async openClient() {
        queue = openQueue();
        await queue.waitUntilReady();
      },
      async enqueueBulk(n) {
        await queue!.addBulk(Array.from({ length: n }, (_, i) => ({ name: JOB_NAME, data: { n: i } })));
      },
      async enqueueOne(k) {
        await queue!.add(JOB_NAME, { k });
      },
      async closeClient() {
        await queue?.close();
        queue = undefined;
      },
      async openPoller() {
        const q = openQueue();
        await q.waitUntilReady();
        let polls = 0;
        return {
          get polls() {
            return polls;
          },
          async busy(n: number) {
            polls++;
            return (await q.getCompletedCount()) < n;
          },
          close: () => q.close(),
        };
      },
      async completed() {
        const q = openQueue();
        try {
          return await q.getCompletedCount();
        } finally {
          await q.close();
        }
      },
      async analyze() {
        // No tables: nothing to analyze.
      },
      async vacuum() {
        // Nor to vacuum.
      },
      destroy: () => deleteRedisPrefix(redisUrl, prefix),
    };
  }
}

/** Runs one statement on its own connection. */
async function exec(url: string, text: string): Promise<void> {
  const client: Client = await connectTo(url);
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

export function redisConnection(redisUrl: string) {
  const url = new URL(redisUrl);
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0,
    maxRetriesPerRequest: null,
  };
}

/** Deletes every key under `prefix:` (BullMQ's keys of one run). */
export async function deleteRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const { default: Redis } = await import('ioredis');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await redis.connect();
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** Redis's version, or why it cannot be reached. */
export async function redisFacts(redisUrl: string): Promise<{ ok: boolean; version?: string; error?: string }> {
  const { default: Redis } = await import('ioredis');
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 2_000, retryStrategy: () => null });
  try {
    await redis.connect();
    const info = await redis.info('server');
    return { ok: true, version: /redis_version:(\S+)/.exec(info)?.[1] };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  } finally {
    redis.disconnect();
  }
}
