/**
 * The measurements. Each function measures one system once on a fresh store and returns the
 * sample plus its raw details; the orchestrator repeats and interleaves them.
 */
import { type ChildConfig, type SystemName, usesPostgres, poolCap } from './common';
import { type Admin, connectTo } from './pg';
import { type ChildHandle, commandCpuMs, cpuMs, handledBy, ipcRoundTripMs, killAll, rearm, rssMiB, spawnChild, spawnMany, stopAll } from './procs';
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

function childConfigs(store: Store, mode: ChildConfig['mode'], processes: number): ChildConfig[] {
  return Array.from({ length: processes }, () => ({ ...store.childConfig(), mode, pool: poolCap(store.system, processes) }));
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
  /** Warm drains: the warm-up jobs worked before the timed ones. */
  warmupJobs?: number;
  /**
   * CPU per job over the drain (from "go" until the poll saw it done), µs: the worker processes
   * (their start call included), and the server (every `postgres` process, or `redis-server` for
   * BullMQ; absent when the server is not on this machine). /proc times: 10 ms resolution.
   */
  workerCpuUsPerJob?: number;
  serverCpuUsPerJob?: number;
}

/**
 * Scenarios 2, 3, 5: N queued no-op jobs worked by `processes` worker processes.
 * Warm (`warm`, fresh table only): each process first works its share of a warm-up batch
 * (`processes` x N / 4 jobs) on an instance of the system that is then stopped; the timed drain runs
 * on a new instance in the same process (its start call, pools and connections as in a cold drain,
 * the code already compiled by V8). What the 2- and 8-process target is for ("claims do not make
 * workers fight", issue 5) without each process's warm-up inside the timed window.
 */
export async function measureDrain(ctx: Context, system: SystemName, processes: number, analyzed: boolean, warm = false) {
  const n = ctx.options.jobs;
  const pg = usesPostgres(system);
  const warmJobs = warm ? processes * Math.ceil(n / 4) : 0;
  return withStore(ctx, system, async (store) => {
    await store.openClient();
    let children: ChildHandle[] = [];
    let poller: Poller | undefined;
    try {
      let enqueueMs: number;
      let x0: { commit: number; rollback: number } | undefined;
      if (warm) {
        await store.enqueueBulk(warmJobs);
        poller = await store.openPoller();
        children = await spawnMany(childConfigs(store, 'drain', processes), { nodeArgs: nodeArgs(ctx, system) });
        const warming = watchFailures(children);
        for (const child of children) child.send({ type: 'warmup' });
        await untilDrained(ctx, children, poller, warmJobs, warming.promise, 'warm-up');
        await Promise.race([Promise.all(children.map((c, i) => rearm(c, i))), warming.promise]);
        warming.disarm();
        const e0 = now();
        await store.enqueueBulk(n);
        enqueueMs = now() - e0;
        await store.closeClient();
      } else {
        const e0 = now();
        await store.enqueueBulk(n);
        enqueueMs = now() - e0;
        await store.closeClient();
        if (analyzed) await store.analyze();
        if (pg) await ctx.admin.waitNoBackends(store.database!);
        x0 = pg ? await ctx.admin.xacts(store.database!) : undefined;
        poller = await store.openPoller();
        children = await spawnMany(childConfigs(store, 'drain', processes), { nodeArgs: nodeArgs(ctx, system) });
      }
      const failed = watchFailures(children);
      const serverCommand = pg ? 'postgres' : 'redis-server';
      const workerCpu = () => children.reduce((sum, c) => sum + cpuMs(c.proc.pid), 0);
      const w0 = workerCpu();
      const s0 = commandCpuMs(serverCommand);
      const tGo = now();
      for (const child of children) child.send({ type: 'go' });
      await untilDrained(ctx, children, poller, warmJobs + n, failed.promise, 'drain', n, tGo);
      const drainMs = now() - tGo;
      const workerCpuMs = workerCpu() - w0;
      const serverCpuMs = commandCpuMs(serverCommand) - s0;
      const startMs = await Promise.all(children.map((c) => c.started));
      failed.disarm();
      await stopAll(children);
      await poller.close();
      const raw: DrainRaw = { jobs: n, processes, analyzed, enqueueMs, drainMs, startMs, completed: 0, pollerQueries: poller.polls };
      if (warm) raw.warmupJobs = warmJobs;
      if (Number.isFinite(workerCpuMs)) raw.workerCpuUsPerJob = (workerCpuMs * 1000) / n;
      if (Number.isFinite(serverCpuMs)) raw.serverCpuUsPerJob = (serverCpuMs * 1000) / n;
      if (pg && x0) {
        await ctx.admin.waitNoBackends(store.database!);
        const x1 = await ctx.admin.xacts(store.database!);
        raw.xactCommits = x1.commit - x0.commit - poller.polls;
        raw.xactRollbacks = x1.rollback - x0.rollback;
        raw.xactsPerJob = raw.xactCommits / n;
      }
      raw.completed = (await store.completed(warmJobs + n)) - warmJobs;
      if (raw.completed !== n) throw new Error(`drain finished with ${raw.completed} of ${n} jobs completed`);
      return { value: (n * 1000) / drainMs, raw };
    } finally {
      await killAll(children);
      await poller?.close().catch(() => undefined);
    }
  });
}

/**
 * Waits until the children have run `handled` handlers (default: all `total` jobs) and the store
 * has no job left (`total` counts every job the store has seen, warm-up included).
 */
async function untilDrained(
  ctx: Context,
  children: ChildHandle[],
  poller: Poller,
  total: number,
  failed: Promise<never>,
  what: string,
  handled = total,
  t0 = now(),
): Promise<void> {
  const overdue = () => {
    if (now() - t0 > ctx.options.drainTimeoutMs) throw new Error(`${what} of ${handled} jobs not done after ${ctx.options.drainTimeoutMs} ms`);
  };
  // Until the worker processes have run every handler, ask them (IPC), not the database: the
  // "is work left?" query itself cost every system server time that grew with the drain's
  // progress (acta's read the processed rows from the table's start: 2-17 ms per poll near the
  // end of a 20,000-job drain, 300-500 ms of a 1.7 s drain, on the same 2 cores).
  let asks = 0;
  for (;;) {
    const counts = await Promise.race([Promise.all(children.map((c) => handledBy(c, asks++))), failed]);
    if (counts.reduce((a, b) => a + b, 0) >= handled) break;
    overdue();
    await sleep(ctx.options.pollMs);
  }
  // Then poll the database until the last completion is committed.
  for (;;) {
    if (!(await Promise.race([poller.busy(total), failed]))) break;
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
 * Issue 3's backpressure: completion writes stalled by `LOCK TABLE acta.executions IN EXCLUSIVE
 * MODE` held for stallMs while a backlog waits; claims made during the stall (rows that turned
 * Executing) must stay bounded by permits + the completed channel, RSS flat, and work resume.
 */
export async function measureBackpressure(ctx: Context, system: SystemName, executors: number) {
  const { backpressureJobs, stallMs } = ctx.options;
  return withStore(ctx, system, async (store) => {
    await insertActaJobs(store.url!, backpressureJobs);
    const [child] = await spawnMany(childConfigs(store, 'drain', 1), { nodeArgs: nodeArgs(ctx, system) });
    const locker = await connectTo(store.url!, 'acta-bench-locker');
    const probe = await connectTo(store.url!, 'acta-bench-probe');
    const count = async (status: string) => Number((await probe.query<{ n: string }>('select count(*) as n from acta.jobs where status = $1', [status])).rows[0].n);
    try {
      child.send({ type: 'go' });
      await child.started;
      await sleep(Math.min(500, stallMs / 2));
      const rssBefore = rssMiB(child.proc.pid);
      const succeededBefore = await count('succeeded');
      await locker.query('begin');
      await locker.query('lock table acta.executions in exclusive mode');
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
           null, null, null, null)`,
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
      const completed = Number((await client.query<{ n: string }>(`select count(*) as n from acta.jobs where status = 'succeeded'`)).rows[0].n);
      if (completed !== n) throw new Error(`floor drain completed ${completed} of ${n}`);
      return { enqueue: (n * 1000) / enqueueMs, drain: (n * 1000) / drainMs, raw: { jobs: n, analyzed, enqueueMs, drainMs, batches: Math.ceil(n / 128) } };
    } finally {
      await client.end().catch(() => undefined);
    }
  });
}

export { spawnChild };
