/**
 * The measurements. Each function measures one system once on a fresh store and returns the
 * sample plus its raw details; the orchestrator repeats and interleaves them.
 */
import { type ChildConfig, monotonicMs, type SystemName, usesPostgres, poolCap } from './common';
import { type Admin, connectTo } from './pg';
import { arm, type ChildHandle, commandCpuByPid, commandCpuMsSince, cpuMs, firstHandlerAfterArm, handledBy, ipcRoundTripMs, killAll, rssMiB, spawnChild, spawnMany, stopAll } from './procs';
import { now, percentile, sleep } from './stats';
import type { Poller, Store, Stores } from './systems';

export interface Options {
  jobs: number;
  latencyJobs: number;
  latencySpacingMs: number;
  /** Untimed jobs, the same way, before the timed ones (see measureLatency). */
  latencyWarmupJobs: number;
  memoryJobs: number;
  memorySeconds: number;
  idleSeconds: number;
  idleSettleSeconds: number;
  stallMs: number;
  backpressureJobs: number;
  pollMs: number;
  drainTimeoutMs: number;
  /** Extra node flags for acta worker processes (profiling). */
  actaNodeArgs: string[];
}

export interface Context {
  admin: Admin;
  stores: Stores;
  options: Options;
}

function nodeArgs(ctx: Context, system: SystemName): string[] {
  return system.startsWith('acta') ? ctx.options.actaNodeArgs : [];
}

function childConfigs(store: Store, mode: ChildConfig['mode'], processes: number, extra: Partial<ChildConfig> = {}): ChildConfig[] {
  return Array.from({ length: processes }, () => ({ ...store.childConfig(), mode, pool: poolCap(store.system, processes), ...extra }));
}

/** Rejects when a worker process fails to start or exits before it is told to stop. */
function watchFailures(children: ChildHandle[]): { promise: Promise<never>; disarm(): void } {
  let armed = true;
  const promise = new Promise<never>((_, reject) => {
    for (const child of children) {
      child.started.catch((err: unknown) => armed && reject(err));
      void child.exited.then((code) => armed && reject(new Error(`worker process ${child.config.system} exited (${code}) during the run\n${child.tail()}`)));
    }
  });
  promise.catch(() => undefined);
  return {
    promise,
    disarm: () => {
      armed = false;
    },
  };
}

async function withStore<T>(ctx: Context, system: SystemName, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await ctx.stores.create(system);
  try {
    return await fn(store);
  } finally {
    await store.closeClient().catch(() => undefined);
    await store.destroy().catch((err) => console.error(`bench: could not drop a store of ${system}: ${err}`));
  }
}

/** Scenario 1: one bulk enqueue call of N jobs. */
export async function measureEnqueue(ctx: Context, system: SystemName) {
  const n = ctx.options.jobs;
  return withStore(ctx, system, async (store) => {
    await store.openClient();
    const t0 = now();
    await store.enqueueBulk(n);
    const ms = now() - t0;
    return { value: (n * 1000) / ms, raw: { jobs: n, ms } };
  });
}

export interface DrainRaw {
  jobs: number;
  processes: number;
  analyzed: boolean;
  enqueueMs: number;
  drainMs: number;
  startMs: number[];
  completed: number;
  xactCommits?: number;
  xactRollbacks?: number;
  pollerQueries: number;
  xactsPerJob?: number;
  /**
   * CPU per job over the drain (from "go" until the poll saw it done), µs: the worker processes
   * (their start call included), and the server (every `postgres` process, or `redis-server` for
   * BullMQ; absent when the server is not on this machine). /proc times: 10 ms resolution.
   */
  workerCpuUsPerJob?: number;
  serverCpuUsPerJob?: number;
  /** Under a held snapshot: the dead row versions in the database's tables as the drain ended. */
  deadTuples?: number;
}

/**
 * A keyed drain (acta only; issue 26): the N jobs spread round-robin over `keys` concurrency keys
 * (job i has key `k<i mod keys>`), the definition declaring `concurrency: { key, limit }`.
 */
export interface KeyedSpec {
  keys: number;
  limit: number;
  /** A rate meter per key instead: `limit` starts per `perMs` (the jobs carry rate keys; maxInFlight is then of the rate key). */
  ratePerMs?: number;
}

/** What the attempt ledger shows of a keyed drain, read after it (acta.all_executions joined to acta.all_jobs). */
export interface KeyedRaw extends KeyedSpec {
  /** Attempts in the ledger, and the keys they had. */
  executions: number;
  keysSeen: number;
  /** The most attempts of one key whose [claimed_at, finished_at) intervals overlap at one instant, over every key. */
  maxInFlight: number;
  /** Mean finished_at − claimed_at: how long an attempt held its slot (claim to the start of its completion write), ms. */
  meanHoldMs: number;
  /** From the first claimed_at to the last finished_at, ms. */
  spanMs: number;
  /** Sum of the holds / span: the attempts in flight on average (one key: that key's). */
  meanInFlight: number;
}

/**
 * Reads a keyed drain's attempts from the ledger: per key, +1 at each claimed_at and −1 at each
 * finished_at, an end before a start at the same instant (the intervals are half-open), and the
 * running sum's maximum.
 */
async function keyedFromLedger(url: string, spec: KeyedSpec): Promise<KeyedRaw> {
  const client = await connectTo(url, 'acta-bench-ledger');
  try {
    const { rows } = await client.query<{ executions: string; keys: string; max_in_flight: string | null; mean_hold_ms: number | null; span_ms: number | null; hold_ms: number | null }>(`
      with e as (
        select ${spec.ratePerMs !== undefined ? 'j.rate_key' : 'j.concurrency_key'} as k, x.claimed_at, x.finished_at
        from acta.all_executions x join acta.all_jobs j on j.id = x.job_id
        where ${spec.ratePerMs !== undefined ? 'j.rate_key' : 'j.concurrency_key'} is not null
      ),
      ev as (
        select k, claimed_at as t, 1 as d from e
        union all
        select k, finished_at, -1 from e
      ),
      running as (
        select sum(d) over (partition by k order by t, d rows unbounded preceding) as n from ev
      )
      select (select count(*) from e) as executions,
             (select count(distinct k) from e) as keys,
             (select max(n) from running) as max_in_flight,
             (select avg(extract(epoch from finished_at - claimed_at)) * 1000 from e)::float8 as mean_hold_ms,
             (select extract(epoch from max(finished_at) - min(claimed_at)) * 1000 from e)::float8 as span_ms,
             (select sum(extract(epoch from finished_at - claimed_at)) * 1000 from e)::float8 as hold_ms`);
    const r = rows[0];
    const spanMs = r.span_ms ?? NaN;
    return {
      ...spec,
      executions: Number(r.executions),
      keysSeen: Number(r.keys),
      maxInFlight: Number(r.max_in_flight ?? NaN),
      meanHoldMs: r.mean_hold_ms ?? NaN,
      spanMs,
      meanInFlight: (r.hold_ms ?? NaN) / spanMs,
    };
  } finally {
    await client.end();
  }
}

/**
 * Scenarios 2, 3, 5: N queued no-op jobs worked by `processes` worker processes. With `keyed`
 * (acta only), the jobs carry concurrency keys and the definition a limit (KeyedSpec), and the
 * attempt ledger is read after the drain (KeyedRaw).
 */
export async function measureDrain(ctx: Context, system: SystemName, processes: number, analyzed: boolean, keyed?: KeyedSpec, held = false) {
  const n = ctx.options.jobs;
  const pg = usesPostgres(system);
  if (keyed && !system.startsWith('acta')) throw new Error(`keyed drains are acta's only, not ${system}'s`);
  if (held && !pg) throw new Error(`a held snapshot is PostgreSQL's, not ${system}'s`);
  return withStore(ctx, system, async (store) => {
    await store.openClient();
    const e0 = now();
    if (keyed?.ratePerMs !== undefined) await store.enqueueRated!(n, (i) => `k${i % keyed.keys}`);
    else if (keyed) await store.enqueueKeyed!(n, (i) => `k${i % keyed.keys}`);
    else await store.enqueueBulk(n);
    const enqueueMs = now() - e0;
    await store.closeClient();
    if (analyzed) await store.analyze();
    if (pg) {
      await ctx.admin.waitNoBackends(store.database!);
      await ctx.admin.checkpoint();
    }
    const x0 = pg ? await ctx.admin.xacts(store.database!) : undefined;
    // A held snapshot: no row version the drain leaves dead can be vacuumed until it ends.
    const hold = held ? await holdSnapshot(store.url!) : undefined;
    const poller = await store.openPoller();
    let children: ChildHandle[] = [];
    try {
      children = await spawnMany(childConfigs(store, 'drain', processes, keyed?.ratePerMs !== undefined ? { rateLimit: { limit: keyed.limit, perMs: keyed.ratePerMs } } : keyed ? { concurrencyLimit: keyed.limit } : {}), { nodeArgs: nodeArgs(ctx, system) });
      const failed = watchFailures(children);
      const cpu = cpuMeter(system, children);
      const tGo = now();
      for (const child of children) child.send({ type: 'go' });
      await untilDrained(ctx, children, poller, n, failed.promise, 'drain', tGo);
      const drainMs = now() - tGo;
      const used = cpu.perJobUs(n);
      const startMs = await Promise.all(children.map((c) => c.started));
      failed.disarm();
      await stopAll(children);
      await poller.close();
      const deadTuples = hold ? await hold.release() : undefined;
      const raw: DrainRaw & { keyed?: KeyedRaw } = { jobs: n, processes, analyzed, enqueueMs, drainMs, startMs, completed: 0, pollerQueries: poller.polls, deadTuples, ...used };
      if (pg) {
        await ctx.admin.waitNoBackends(store.database!);
        const x1 = await ctx.admin.xacts(store.database!);
        raw.xactCommits = x1.commit - x0!.commit - poller.polls;
        raw.xactRollbacks = x1.rollback - x0!.rollback;
        raw.xactsPerJob = raw.xactCommits / n;
      }
      raw.completed = await store.completed(n);
      if (raw.completed !== n) throw new Error(`drain finished with ${raw.completed} of ${n} jobs completed`);
      if (keyed) raw.keyed = await keyedFromLedger(store.url!, keyed);
      return { value: (n * 1000) / drainMs, raw };
    } finally {
      await killAll(children);
      await poller.close().catch(() => undefined);
      await hold?.release().catch(() => undefined);
    }
  });
}

/**
 * A connection holding a transaction open with its snapshot taken (a long report, an idle-in-
 * transaction session): the database's xmin horizon stays where it was. release() ends it and
 * answers the dead row versions its tables held then (pg_stat_user_tables.n_dead_tup; the
 * statistics are a little behind).
 */
async function holdSnapshot(url: string): Promise<{ release(): Promise<number> }> {
  const client = await connectTo(url, 'acta-bench-hold');
  await client.query('begin isolation level repeatable read');
  await client.query('select txid_current()');
  let released: Promise<number> | undefined;
  return {
    release: () =>
      (released ??= (async () => {
        try {
          const { rows } = await client.query<{ dead: string }>('select coalesce(sum(n_dead_tup), 0)::text as dead from pg_stat_user_tables');
          return Number(rows[0].dead);
        } finally {
          await client.query('rollback').catch(() => undefined);
          await client.end().catch(() => undefined);
        }
      })()),
  };
}

export interface WarmDrainRaw {
  jobs: number;
  processes: number;
  /** Untimed jobs worked first, shared by the processes. */
  warmupJobs: number;
  /** The warm-up jobs each process ran. */
  warmupHandled: number[];
  /** The timed bulk enqueue call. */
  enqueueMs: number;
  /**
   * From the bulk call's start until the first handler of the timed jobs started, ms (in some
   * systems before the call returns: graphile-worker's addJobs and BullMQ's addBulk return every
   * job, and the workers run while the client reads them).
   */
  firstStartMs: number;
  /** From the first handler's start until the poll saw every job done, ms. */
  drainMs: number;
  /** Timed jobs completed (the store's completed count minus the warm-up jobs). */
  completed: number;
  /** As in DrainRaw, over the timed drain. */
  workerCpuUsPerJob?: number;
  serverCpuUsPerJob?: number;
}

/**
 * Warm drains (not one of the original targets' measurements): `processes` worker processes started
 * and working, which first share 2 × N untimed jobs; then the store is vacuumed and they sit idle
 * 0.5 s; then N jobs are queued in one bulk call, and the time runs from the first of them's
 * handler start (on the machine's monotonic clock, noted by the worker process) until the last
 * completion is committed: not from the call's return, which in some systems comes after the
 * workers ran most of the jobs (see `firstStartMs`). The same started instance of the system works
 * both batches, as a worker in service does: no start call, pools and connections open, V8's code
 * tiered up. What the 2- and 8-process target ("claims do not make workers fight";
 * docs/performance.md) is about, without each process's start and warm-up inside the window. The
 * table is not fresh (it holds the warm-up's rows, vacuumed); no transactions are counted. The CPU
 * meter runs from the bulk call's start: the server figure includes the enqueue.
 */
export async function measureWarmDrain(ctx: Context, system: SystemName, processes: number) {
  const n = ctx.options.jobs;
  const warmupJobs = 2 * n;
  return withStore(ctx, system, async (store) => {
    await store.openClient();
    await store.enqueueBulk(warmupJobs);
    const poller = await store.openPoller();
    let children: ChildHandle[] = [];
    try {
      children = await spawnMany(childConfigs(store, 'drain', processes), { nodeArgs: nodeArgs(ctx, system) });
      const failed = watchFailures(children);
      for (const child of children) child.send({ type: 'go' });
      await untilDrained(ctx, children, poller, warmupJobs, failed.promise, 'warm-up');
      const warmupHandled = await Promise.race([Promise.all(children.map((c, i) => handledBy(c, -1 - i))), failed.promise]);
      // What autovacuum does in service (off on this bench's server): without it the claims of the
      // timed jobs walked the warm-up's dead index entries (acta: an empty claim read 198 index
      // pages, 1.2 ms, after 40,000 jobs; README, "What makes a claim slower").
      await store.vacuum();
      await sleep(500);
      await Promise.race([Promise.all(children.map((c, i) => arm(c, -1 - i))), failed.promise]);
      const cpu = cpuMeter(system, children);
      const e0 = monotonicMs();
      await store.enqueueBulk(n);
      const enqueueMs = monotonicMs() - e0;
      await untilDrained(ctx, children, poller, warmupJobs + n, failed.promise, 'warm drain');
      const end = monotonicMs();
      const used = cpu.perJobUs(n);
      const firsts = await Promise.race([Promise.all(children.map((c, i) => firstHandlerAfterArm(c, -1 - i))), failed.promise]);
      const started = firsts.filter((t): t is number => t !== undefined);
      if (started.length === 0) throw new Error(`warm drain: no worker process noted a handler start after the bulk call`);
      const t0 = Math.min(...started);
      const drainMs = end - t0;
      failed.disarm();
      await stopAll(children);
      const completed = (await store.completed(warmupJobs + n)) - warmupJobs;
      if (completed !== n) throw new Error(`warm drain finished with ${completed} of ${n} jobs completed`);
      const raw: WarmDrainRaw = { jobs: n, processes, warmupJobs, warmupHandled, enqueueMs, firstStartMs: t0 - e0, drainMs, completed, ...used };
      return { value: (n * 1000) / drainMs, raw };
    } finally {
      await killAll(children);
      await poller.close().catch(() => undefined);
    }
  });
}

/** CPU of the worker processes and of the server (see DrainRaw) from now; `perJobUs` reads it. */
function cpuMeter(system: SystemName, children: ChildHandle[]) {
  const serverCommand = usesPostgres(system) ? 'postgres' : 'redis-server';
  const workerCpu = () => children.reduce((sum, c) => sum + cpuMs(c.proc.pid), 0);
  const w0 = workerCpu();
  const s0 = commandCpuByPid(serverCommand);
  return {
    perJobUs(n: number): { workerCpuUsPerJob?: number; serverCpuUsPerJob?: number } {
      const worker = workerCpu() - w0;
      const server = commandCpuMsSince(serverCommand, s0);
      return {
        ...(Number.isFinite(worker) ? { workerCpuUsPerJob: (worker * 1000) / n } : {}),
        ...(Number.isFinite(server) ? { serverCpuUsPerJob: (server * 1000) / n } : {}),
      };
    },
  };
}

/** Waits until the children have run `n` handlers and the store has no job left. */
async function untilDrained(ctx: Context, children: ChildHandle[], poller: Poller, n: number, failed: Promise<never>, what: string, t0 = now()): Promise<void> {
  const overdue = () => {
    if (now() - t0 > ctx.options.drainTimeoutMs) throw new Error(`${what} of ${n} jobs not done after ${ctx.options.drainTimeoutMs} ms`);
  };
  // Until the worker processes have run every handler, ask them (IPC), not the database: the
  // "is work left?" query itself cost every system server time that grew with the drain's
  // progress (acta's read the processed rows from the table's start: 2-17 ms per poll near the
  // end of a 20,000-job drain, 300-500 ms of a 1.7 s drain, on the same 2 cores).
  let asks = 0;
  for (;;) {
    const counts = await Promise.race([Promise.all(children.map((c) => handledBy(c, asks++))), failed]);
    if (counts.reduce((a, b) => a + b, 0) >= n) break;
    overdue();
    await sleep(ctx.options.pollMs);
  }
  // Then poll the database until the last completion is committed.
  for (;;) {
    if (!(await Promise.race([poller.busy(n), failed]))) break;
    overdue();
    await sleep(1);
  }
}

/**
 * Scenario 4: an idle worker; jobs enqueued one at a time; enqueue→handler-start on the orchestrator's clock.
 * The timed jobs come after `latencyWarmupJobs` untimed ones sent the same way, and a settle: a worker
 * process's first jobs pay one-off costs (new connections, the server compiling the functions, V8 tiering
 * its hot paths up), which for acta were the 1st, 2nd, 21st and 185th jobs' 5–12 extra ms (bench/README.md),
 * and an idle worker in service has paid them long before.
 */
export async function measureLatency(ctx: Context, system: SystemName) {
  const { latencyJobs, latencySpacingMs, latencyWarmupJobs } = ctx.options;
  return withStore(ctx, system, async (store) => {
    await store.openClient();
    const [child] = await spawnMany(childConfigs(store, 'latency', 1), { nodeArgs: nodeArgs(ctx, system) });
    try {
      const ipcRttMs = await ipcRoundTripMs(child);
      const sent = new Array<number>(latencyJobs).fill(NaN);
      const startedAt = new Array<number>(latencyJobs).fill(NaN);
      const enqueueCallMs: number[] = [];
      let seen = 0;
      let warmupSeen = 0;
      child.onJob = (k) => {
        if (k < 0) warmupSeen++;
        else if (k < latencyJobs && Number.isNaN(startedAt[k])) {
          startedAt[k] = now();
          seen++;
        }
      };
      child.send({ type: 'go' });
      await child.started;
      const settle = () => sleep(Math.min(1_500, 250 + latencyJobs * 5)); // let the worker settle into its idle state
      /** Sends `count` jobs (payload key `keyOf(i)`) one at a time, `latencySpacingMs` apart; `after(i, t0)` once each call returned. */
      const send = async (count: number, keyOf: (i: number) => number, after: (i: number, t0: number) => void) => {
        for (let i = 0; i < count; i++) {
          const t0 = now();
          await store.enqueueOne(keyOf(i));
          after(i, t0);
          const wait = t0 + latencySpacingMs - now();
          if (wait > 0) await sleep(wait);
        }
      };
      await settle();
      if (latencyWarmupJobs > 0) {
        await send(latencyWarmupJobs, (i) => -1 - i, () => undefined);
        const warmDeadline = now() + 5_000;
        while (warmupSeen < latencyWarmupJobs && now() < warmDeadline) await sleep(10);
        if (warmupSeen < latencyWarmupJobs) throw new Error(`only ${warmupSeen} of ${latencyWarmupJobs} warm-up jobs started within 5 s`);
        await settle();
      }
      await send(
        latencyJobs,
        (k) => k,
        (k, t0) => {
          sent[k] = t0;
          enqueueCallMs.push(now() - t0);
        },
      );
      const deadline = now() + 5_000;
      while (seen < latencyJobs && now() < deadline) await sleep(10);
      const latencies = sent.map((t, k) => startedAt[k] - t).filter((x) => Number.isFinite(x));
      if (latencies.length < latencyJobs) throw new Error(`only ${latencies.length} of ${latencyJobs} jobs started within 5 s`);
      return {
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        raw: {
          jobs: latencyJobs,
          spacingMs: latencySpacingMs,
          warmupJobs: latencyWarmupJobs,
          ipcRoundTripMs: ipcRttMs,
          enqueueCallP50Ms: percentile(enqueueCallMs, 50),
          enqueueCallP99Ms: percentile(enqueueCallMs, 99),
          latenciesMs: latencies.map((x) => Math.round(x * 1000) / 1000),
          enqueueCallsMs: enqueueCallMs.map((x) => Math.round(x * 1000) / 1000),
        },
      };
    } finally {
      await stopAll([child]);
    }
  });
}

/** Idle cost: transactions per second of an idle worker, after it settled. */
export async function measureIdle(ctx: Context, system: SystemName) {
  const { idleSeconds, idleSettleSeconds } = ctx.options;
  return withStore(ctx, system, async (store) => {
    const [child] = await spawnMany(childConfigs(store, 'idle', 1), { nodeArgs: nodeArgs(ctx, system) });
    try {
      child.send({ type: 'go' });
      await child.started;
      await sleep(idleSettleSeconds * 1000);
      const x0 = await ctx.admin.xacts(store.database!);
      const t0 = now();
      await sleep(idleSeconds * 1000);
      const x1 = await ctx.admin.xacts(store.database!);
      const seconds = (now() - t0) / 1000;
      return { value: (x1.commit - x0.commit) / seconds, raw: { seconds, commits: x1.commit - x0.commit, settleSeconds: idleSettleSeconds } };
    } finally {
      await killAll([child]);
    }
  });
}

/**
 * Flat RSS: the last third's max ≤ 1.1 × the middle third's max. The first third is the warm-up
 * (V8 grows its heap to its working size in the first 10–20 s); a leak keeps growing after it.
 */
export function flatness(rssMiB: number[]): { middleMax: number; lastMax: number; flat: boolean } {
  const third = Math.max(1, Math.floor(rssMiB.length / 3));
  const middleMax = Math.max(...rssMiB.slice(third, Math.max(third + 1, 2 * third)));
  const lastMax = Math.max(...rssMiB.slice(2 * third));
  return { middleMax, lastMax, flat: lastMax <= middleMax * 1.1 };
}

/** Inserts `n` due no-op jobs into acta.jobs in one statement (setup only, not measured). */
async function insertActaJobs(url: string, n: number): Promise<void> {
  const client = await connectTo(url);
  try {
    await client.query(`insert into acta.jobs (namespace, definition, payload) select 'default', 'noop', jsonb_build_object('n', g) from generate_series(1, $1::int) g`, [n]);
  } finally {
    await client.end();
  }
}

/** Scenario 6: RSS of one acta worker process through a run with a large backlog. */
export async function measureMemory(ctx: Context, system: SystemName) {
  const { memoryJobs, memorySeconds } = ctx.options;
  return withStore(ctx, system, async (store) => {
    const i0 = now();
    await insertActaJobs(store.url!, memoryJobs);
    const insertMs = now() - i0;
    const poller = await store.openPoller();
    const [child] = await spawnMany(childConfigs(store, 'drain', 1), { nodeArgs: nodeArgs(ctx, system) });
    const samples: { t: number; rssMiB: number }[] = [];
    try {
      samples.push({ t: 0, rssMiB: rssMiB(child.proc.pid) });
      const tGo = now();
      child.send({ type: 'go' });
      let lastPoll = 0;
      let drained = false;
      while (now() - tGo < memorySeconds * 1000) {
        await sleep(250);
        samples.push({ t: Math.round(now() - tGo), rssMiB: rssMiB(child.proc.pid) });
        if (now() - lastPoll > 1_000) {
          lastPoll = now();
          if (!(await poller.busy(memoryJobs))) {
            drained = true;
            break;
          }
        }
      }
      const seconds = (now() - tGo) / 1000;
      await stopAll([child]);
      const worked = await store.completed(memoryJobs);
      const rss = samples.slice(1).map((s) => s.rssMiB);
      const flat = flatness(rss);
      return {
        value: Math.max(...rss),
        raw: {
          backlog: memoryJobs,
          insertMs,
          seconds,
          drained,
          worked,
          jobsPerSecond: worked / seconds,
          rssBeforeGoMiB: samples[0].rssMiB,
          rssMinMiB: Math.min(...rss),
          rssMaxMiB: Math.max(...rss),
          rssLastMiB: rss[rss.length - 1],
          middleThirdMaxMiB: flat.middleMax,
          lastThirdMaxMiB: flat.lastMax,
          flat: flat.flat,
          samples,
        },
      };
    } finally {
      await killAll([child]);
      await poller.close().catch(() => undefined);
    }
  });
}

/**
 * Backpressure (docs/DESIGN.md, "The pipeline inside one worker"): completion writes stalled by
 * `LOCK TABLE acta.executions, acta.succeeded_jobs IN EXCLUSIVE MODE` held for stallMs while a backlog waits; claims
 * made during the stall (rows that turned Executing) must stay bounded by permits + the completed
 * channel, RSS flat, and work resume.
 */
export async function measureBackpressure(ctx: Context, system: SystemName, executors: number) {
  const { backpressureJobs, stallMs } = ctx.options;
  return withStore(ctx, system, async (store) => {
    await insertActaJobs(store.url!, backpressureJobs);
    const [child] = await spawnMany(childConfigs(store, 'drain', 1), { nodeArgs: nodeArgs(ctx, system) });
    const locker = await connectTo(store.url!, 'acta-bench-locker');
    const probe = await connectTo(store.url!, 'acta-bench-probe');
    const count = async (status: string) => Number((await probe.query<{ n: string }>('select count(*) as n from acta.all_jobs where status = $1', [status])).rows[0].n);
    try {
      child.send({ type: 'go' });
      await child.started;
      await sleep(Math.min(500, stallMs / 2));
      const rssBefore = rssMiB(child.proc.pid);
      const succeededBefore = await count('succeeded');
      await locker.query('begin');
      // Both tables a completion writes: the attempt ledger, and acta.succeeded_jobs for a moved success.
      await locker.query('lock table acta.executions, acta.succeeded_jobs in exclusive mode');
      const e0 = await count('executing');
      const s0 = await count('succeeded');
      const rss: number[] = [];
      const executing: number[] = [];
      const t0 = now();
      while (now() - t0 < stallMs) {
        await sleep(100);
        rss.push(rssMiB(child.proc.pid));
        executing.push(await count('executing'));
      }
      const e1 = await count('executing');
      const s1 = await count('succeeded');
      await locker.query('commit');
      await sleep(Math.min(1_000, stallMs / 2));
      const succeededAfter = await count('succeeded');
      await stopAll([child]);
      const claims = e1 - e0 + (s1 - s0);
      const bound = 128 + 2 * executors;
      return {
        value: claims,
        raw: {
          backlog: backpressureJobs,
          stallMs,
          executors,
          executingAtStallStart: e0,
          executingAtStallEnd: e1,
          completedDuringStall: s1 - s0,
          claimsDuringStall: claims,
          bound,
          withinBound: claims <= bound,
          rssBeforeMiB: rssBefore,
          rssMaxDuringMiB: Math.max(...rss),
          executingSamples: executing,
          succeededBeforeStall: succeededBefore,
          resumed: succeededAfter > s1,
          completedInTheSecondAfter: succeededAfter - s1,
        },
      };
    } finally {
      await locker.query('rollback').catch(() => undefined);
      await locker.end().catch(() => undefined);
      await probe.end().catch(() => undefined);
      await killAll([child]);
    }
  });
}

/**
 * Scenario 7, the floor: acta's own SQL with no client. Enqueue: one acta.enqueue_jobs call of N
 * elements built in the server. Drain: a DO block looping claim_jobs(…, 128, …) +
 * complete_executions(…) until empty, committing per batch; timed by one round trip.
 */
export async function measureFloor(ctx: Context, analyzed: boolean) {
  const n = ctx.options.jobs;
  return withStore(ctx, 'acta-default', async (store) => {
    const client = await connectTo(store.url!, 'acta-bench-floor');
    try {
      const e0 = now();
      await client.query(
        `select created from acta.enqueue_jobs('default',
           array_fill('noop'::text, array[$1::int]),
           (select jsonb_agg(jsonb_build_object('n', g)) from generate_series(1, $1::int) g),
           null, null, null, null, null, null, null)`,
        [n],
      );
      const enqueueMs = now() - e0;
      if (analyzed) await client.query('analyze');
      const d0 = now();
      await client.query(`
        do $floor$
        declare
          w uuid := gen_random_uuid();
          ids bigint[];
          execs integer[];
        begin
          loop
            select array_agg(c.job_id), array_agg(c.execution) into ids, execs
              from acta.claim_jobs('default', w, array['noop'], 128, 180000) c
              where c.job_id is not null;
            exit when ids is null;
            perform acta.complete_executions(w, ids, execs,
              array_fill('succeeded'::text, array[cardinality(ids)]),
              array_fill('null'::jsonb, array[cardinality(ids)]),
              array_fill(null::jsonb, array[cardinality(ids)]),
              array_fill(0, array[cardinality(ids)]));
            commit;
          end loop;
        end
        $floor$`);
      const drainMs = now() - d0;
      const completed = Number((await client.query<{ n: string }>(`select count(*) as n from acta.all_jobs where status = 'succeeded'`)).rows[0].n);
      if (completed !== n) throw new Error(`floor drain completed ${completed} of ${n}`);
      return { enqueue: (n * 1000) / enqueueMs, drain: (n * 1000) / drainMs, raw: { jobs: n, analyzed, enqueueMs, drainMs, batches: Math.ceil(n / 128) } };
    } finally {
      await client.end().catch(() => undefined);
    }
  });
}

export { spawnChild };
