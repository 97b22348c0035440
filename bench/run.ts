/**
 * `npm run bench`: the side-by-side benchmark of acta, graphile-worker, pg-boss and BullMQ.
 *
 *   npm run bench -- [--runs 3] [--jobs 20000] [--quick] [--only acta-default,graphile-perf]
 *                    [--scenarios enqueue,drain,keys,rate,held,warm,latency,idle,memory,backpressure,floor]
 *                    [--variants fresh,analyzed] [--memory-jobs 1000000] [--memory-seconds 45] [--out bench/results]
 *   node dist/bench/run.js --report bench/results/<timestamp>.json   (rewrites that run's .md and .svg, and latest.*)
 *                    [--cpu-prof <dir>]   (acta worker processes write .cpuprofile files there)
 *   ACTA_BENCH_NODE_FLAGS="--no-opt" npm run bench -- ...   (extra node flags for the acta worker processes,
 *                    e.g. to see what V8's optimizing compiler costs a fresh process: bench/README)
 *
 * Every system runs under this same Node (the bench script starts it with the Node 22 binary of
 * bench/package.json's `node-22`) in worker processes of its own; each measurement gets a fresh
 * database (copied from a per-system template holding the installed schema) or, for BullMQ, a
 * fresh Redis key prefix. Systems are interleaved within each run; each scenario is repeated
 * `--runs` times and reported as median (min–max). Output: a Markdown table on stdout and in
 * <out>/<timestamp>.md and latest.md, all raw samples in <out>/<timestamp>.json (and latest.json),
 * and a chart in <out>/<timestamp>.svg (and latest.svg).
 */
import { execSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isActaPolicySystem, SETTINGS, SYSTEMS, type SystemName, usesPostgres } from './common';
import { peerVersion } from './peers';
import { Admin } from './pg';
import { checkTargets, markdownTable, settingsTable, svgChart, targetsTable } from './report';
import { type BenchResult, type Row, type RowSystem, SCENARIOS, warmDrained } from './results';
import {
  type Context,
  measureBackpressure,
  measureDrain,
  measureEnqueue,
  measureFloor,
  measureIdle,
  measureLatency,
  flatness,
  measureMemory,
  measureWarmDrain,
  type KeyedSpec,
  type Options,
} from './scenarios';
import { summarize } from './stats';
import { redisFacts, Stores } from './systems';

/** The held-snapshot drain: HELD_FACTOR × --jobs jobs (200,000 at the default), within the hold's 10 minutes. */
const HELD_FACTOR = 10;
const HELD_TIMEOUT_MS = 600_000;

export const SCENARIO_GROUPS = ['floor', 'enqueue', 'drain1', 'drain2', 'drain8', 'keys', 'rate', 'held', 'warm', 'latency', 'idle', 'memory', 'backpressure'] as const;
type Group = (typeof SCENARIO_GROUPS)[number];

interface Args {
  runs: number;
  quick: boolean;
  only: SystemName[];
  scenarios: Group[];
  out: string;
  /** Drain variants: fresh table, after ANALYZE. */
  variants: boolean[];
  options: Options;
}

function parseArgs(argv: string[]): Args {
  const get = (name: string): string | undefined => {
    const i = argv.indexOf(`--${name}`);
    if (i >= 0) return argv[i + 1];
    const eq = argv.find((a) => a.startsWith(`--${name}=`));
    return eq ? eq.slice(name.length + 3) : undefined;
  };
  const num = (name: string, fallback: number) => {
    const v = get(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} needs a positive number, got ${v}`);
    return n;
  };
  const quick = argv.includes('--quick');
  const only = (get('only')?.split(',').filter(Boolean) ?? [...SYSTEMS]) as SystemName[];
  for (const s of only) if (!SYSTEMS.includes(s)) throw new Error(`--only: unknown system ${s} (known: ${SYSTEMS.join(', ')})`);
  const scenarioList = get('scenarios')?.split(',').filter(Boolean) ?? [...SCENARIO_GROUPS];
  const scenarios: Group[] = [];
  for (const s of scenarioList) {
    if (s === 'drain') scenarios.push('drain1', 'drain2', 'drain8');
    else if ((SCENARIO_GROUPS as readonly string[]).includes(s)) scenarios.push(s as Group);
    else throw new Error(`--scenarios: unknown ${s} (known: drain, ${SCENARIO_GROUPS.join(', ')})`);
  }
  const cpuProf = get('cpu-prof');
  const variantList = get('variants')?.split(',') ?? ['fresh', 'analyzed'];
  for (const v of variantList) if (v !== 'fresh' && v !== 'analyzed') throw new Error(`--variants: fresh and/or analyzed, got ${v}`);
  const jobs = num('jobs', quick ? 300 : 20_000);
  return {
    runs: num('runs', quick ? 1 : 3),
    quick,
    only,
    scenarios,
    variants: [...(variantList.includes('fresh') ? [false] : []), ...(variantList.includes('analyzed') ? [true] : [])],
    out: path.resolve(get('out') ?? path.join(__dirname, '..', '..', 'bench', 'results')),
    options: {
      jobs,
      latencyJobs: num('latency-jobs', quick ? 20 : 200),
      latencySpacingMs: num('latency-spacing', quick ? 10 : 15),
      latencyWarmupJobs: num('latency-warmup', quick ? 5 : 200),
      memoryJobs: num('memory-jobs', quick ? 3_000 : 1_000_000),
      memorySeconds: num('memory-seconds', quick ? 1.5 : 45),
      idleSeconds: num('idle-seconds', quick ? 0.5 : 30), // ±1–2 transactions of statistics lag are ±0.07/s over 30 s (±0.13/s over 15 s)
      // PostgreSQL 15 publishes an idle session's last counters only after 10 s (PGSTAT_IDLE_INTERVAL), or when
      // it exits: a shorter settle counts the worker's start-up transactions as idle ones.
      idleSettleSeconds: num('idle-settle', quick ? 0.2 : 12),
      stallMs: num('stall-ms', quick ? 600 : 3_000),
      backpressureJobs: num('backpressure-jobs', quick ? 20_000 : 100_000), // quick: enough that 128 executors are still busy when the stall begins
      pollMs: 10,
      drainTimeoutMs: num('drain-timeout', quick ? 60_000 : Math.max(120_000, jobs * 5)),
      actaNodeArgs: [...(cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(cpuProf)}`] : []), ...(process.env.ACTA_BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean)],
    },
  };
}

const log = (line: string) => process.stderr.write(`${line}\n`);

function packageVersion(name: string): string {
  try {
    return JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'node_modules', name, 'package.json'), 'utf8')).version;
  } catch {
    return '?';
  }
}

function gitFacts(): string {
  try {
    const cwd = path.join(__dirname, '..', '..');
    const head = execSync('git rev-parse --short HEAD', { cwd, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
    const dirty = execSync('git status --porcelain', { cwd, stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim().split('\n').filter(Boolean).length;
    return `${head}${dirty ? ` + ${dirty} uncommitted changes` : ''}`;
  } catch {
    return 'unknown';
  }
}

/** Rotates `xs` by `r` so that no system is always measured first. */
const rotate = <T>(xs: T[], r: number) => xs.map((_, i) => xs[(i + r) % xs.length]);

/** A drain's CPU per job as shown on the progress line ('' where /proc did not show it). */
const cpuText = (raw: { workerCpuUsPerJob?: number; serverCpuUsPerJob?: number }) =>
  raw.workerCpuUsPerJob !== undefined ? `; CPU per job: worker ${raw.workerCpuUsPerJob.toFixed(1)} µs, server ${raw.serverCpuUsPerJob?.toFixed(1) ?? '?'} µs` : '';

export async function main(argv = process.argv.slice(2)): Promise<BenchResult> {
  const args = parseArgs(argv);
  const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const redisUrl = process.env.BENCH_REDIS_URL ?? process.env.ACTA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const started = new Date();
  const admin = await Admin.open(serverUrl);
  const server = await admin.serverFacts();
  const redis = await redisFacts(redisUrl);
  let systems = args.only;
  const skipped: string[] = [];
  if (!redis.ok && systems.includes('bullmq')) {
    systems = systems.filter((s) => s !== 'bullmq');
    skipped.push(`bullmq: Redis at ${redisUrl} is not reachable (${redis.error})`);
    log(`bench: skipping bullmq: Redis at ${redisUrl} is not reachable (${redis.error})`);
  }
  const cpus = os.cpus();
  const machineLine = `${cpus.length} cores (${cpus[0]?.model ?? '?'}), PostgreSQL ${server.server_version}, Node ${process.version}`;
  const meta: Record<string, unknown> = {
    title: `acta vs graphile-worker, pg-boss, BullMQ — ${args.options.jobs.toLocaleString('en-US')} jobs, ${args.runs} run(s)`,
    started: started.toISOString(),
    command: `npm run bench -- ${argv.join(' ')}`.trim(),
    runs: args.runs,
    quick: args.quick,
    options: args.options,
    systems,
    skipped,
    machineLine,
    machine: { cores: cpus.length, cpuModel: cpus[0]?.model, memoryGiB: Math.round(os.totalmem() / 2 ** 30), os: `${os.type()} ${os.release()}`, node: process.version },
    postgres: server,
    redis,
    versions: { acta: packageVersion('../'), 'graphile-worker': peerVersion('graphile-worker'), 'pg-boss': peerVersion('pg-boss'), bullmq: peerVersion('bullmq'), pg: packageVersion('pg') },
    git: gitFacts(),
  };
  log(`bench: ${machineLine}; systems ${systems.join(', ')}; scenarios ${args.scenarios.join(', ')}; ${args.runs} run(s) of ${args.options.jobs} jobs`);

  const stores = new Stores({ admin, serverUrl, redisUrl, runId: Stores.runId() });
  const ctx: Context = { admin, stores, options: args.options };
  const raw: BenchResult['raw'] = [];
  const samples = new Map<string, { system: RowSystem; scenario: string; values: number[]; errors: string[] }>();
  const record = (run: number, scenario: string, system: RowSystem, value: number | undefined, details?: unknown, error?: string) => {
    const key = `${scenario}\u0000${system}`;
    let entry = samples.get(key);
    if (!entry) samples.set(key, (entry = { system, scenario, values: [], errors: [] }));
    if (error !== undefined) entry.errors.push(error);
    else if (value !== undefined && Number.isFinite(value)) entry.values.push(value);
    raw.push({ run, scenario, system, value, error, details });
  };
  const unitOf = (scenario: string) => SCENARIOS.find((s) => s.id === scenario)?.unit ?? '';
  const show = (run: number, scenario: string, system: RowSystem, value: number | undefined, note = '') =>
    log(`[run ${run}/${args.runs}] ${scenario.padEnd(20)} ${String(system).padEnd(16)} ${value === undefined ? 'FAILED' : `${value.toFixed(value < 10 ? 3 : 0)} ${unitOf(scenario)}`}${note}`);
  /** Runs one measurement; a failure is recorded and the bench goes on. */
  const attempt = async (run: number, scenario: string, system: RowSystem, fn: () => Promise<void>) => {
    const t0 = Date.now();
    try {
      await fn();
      if (process.env.BENCH_VERBOSE) log(`  (${Date.now() - t0} ms)`);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      record(run, scenario, system, undefined, undefined, message);
      show(run, scenario, system, undefined, `: ${message.split('\n').slice(0, 6).join(' | ')}`);
    }
  };
  const pgSystems = systems.filter(usesPostgres);
  const actaSystems = systems.filter(isActaPolicySystem);
  const has = (g: Group) => args.scenarios.includes(g);
  const memoryFlat: Record<string, boolean> = {};
  /** The plain acta drain (1 process, fresh) of each run, `${run}/${system}`: what the keyed drains are divided by. */
  const plainDrain = new Map<string, number>();
  const backpressure: Record<string, { claims: number; bound: number }> = {};

  const interrupted = () => {
    log('bench: interrupted; dropping its databases');
    void stores.close().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  // A library's stray error event must not leave the run's databases behind.
  const crashed = (err: unknown) => {
    log(`bench: uncaught ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    void stores.close().finally(() => process.exit(1));
  };
  process.once('uncaughtException', crashed);

  try {
    for (let run = 1; run <= args.runs; run++) {
      const order = rotate(systems, run - 1);
      if (has('floor') && actaSystems.length > 0) {
        for (const analyzed of [false, true]) {
          const scenario = analyzed ? 'floor-drain-analyzed' : 'floor-drain-fresh';
          await attempt(run, scenario, 'floor', async () => {
            const r = await measureFloor(ctx, analyzed);
            record(run, scenario, 'floor', r.drain, r.raw);
            record(run, 'floor-enqueue', 'floor', r.enqueue, r.raw);
            show(run, scenario, 'floor', r.drain, `; enqueue_jobs ${Math.round(r.enqueue)} jobs/s`);
          });
        }
      }
      if (has('enqueue')) {
        for (const system of order) {
          await attempt(run, 'enqueue', system, async () => {
            const r = await measureEnqueue(ctx, system);
            record(run, 'enqueue', system, r.value, r.raw);
            show(run, 'enqueue', system, r.value);
          });
        }
      }
      for (const processes of [1, 2, 8] as const) {
        if (!has(`drain${processes}` as Group)) continue;
        for (const analyzed of args.variants) {
          const scenario = `drain${processes}-${analyzed ? 'analyzed' : 'fresh'}`;
          for (const system of analyzed ? rotate(pgSystems, run - 1) : order) {
            await attempt(run, scenario, system, async () => {
              const r = await measureDrain(ctx, system, processes, analyzed);
              record(run, scenario, system, r.value, r.raw);
              if (processes === 1 && !analyzed) plainDrain.set(`${run}/${system}`, r.value);
              if (processes === 1 && r.raw.xactsPerJob !== undefined) record(run, 'xacts-per-job', system, r.raw.xactsPerJob, { from: scenario });
              // Where the time goes: CPU per job on each side, where /proc shows both.
              if (processes === 1 && !analyzed && r.raw.workerCpuUsPerJob !== undefined) record(run, 'cpu-worker', system, r.raw.workerCpuUsPerJob, { from: scenario });
              if (processes === 1 && !analyzed && r.raw.serverCpuUsPerJob !== undefined) record(run, 'cpu-server', system, r.raw.serverCpuUsPerJob, { from: scenario });
              show(run, scenario, system, r.value, (r.raw.xactsPerJob !== undefined ? `; ${r.raw.xactsPerJob.toFixed(3)} tx/job` : '') + cpuText(r.raw));
            });
          }
        }
      }
      if (has('keys')) {
        // Issue 26: beside the plain drain, in the same run, with its process count and executors
        // (1 process, fresh table). acta only: the peers' free editions have no fleet-wide keys.
        const { defaultExecutors } = await import('../src');
        for (const system of rotate(actaSystems, run - 1)) {
          if (!plainDrain.has(`${run}/${system}`)) {
            // No plain drain measured in this run (e.g. --scenarios keys): measure it here, as drain1-fresh.
            await attempt(run, 'drain1-fresh', system, async () => {
              const r = await measureDrain(ctx, system, 1, false);
              record(run, 'drain1-fresh', system, r.value, r.raw);
              plainDrain.set(`${run}/${system}`, r.value);
              show(run, 'drain1-fresh', system, r.value, ' (the keyed drains\' reference)' + cpuText(r.raw));
            });
          }
          const plain = plainDrain.get(`${run}/${system}`);
          const executors = SETTINGS[system as 'acta-default' | 'acta-best'].executors ?? defaultExecutors();
          const keyed: { scenario: string; prefix: string; spec: KeyedSpec }[] = [
            { scenario: 'drain-keys-1000', prefix: 'keys-1000', spec: { keys: 1000, limit: 1 } },
            { scenario: 'drain-hot-key', prefix: 'hot-key', spec: { keys: 1, limit: 10 } },
          ];
          for (const { scenario, prefix, spec } of keyed) {
            await attempt(run, scenario, system, async () => {
              const r = await measureDrain(ctx, system, 1, false, spec);
              const k = r.raw.keyed!;
              // At most `limit` attempts of the key hold a slot, each for meanHoldMs (claim to completion
              // write: an attempt whose handler is done holds it until its completion is written, so
              // even 8 executors can have more than 8 in flight).
              const bound = (spec.limit * 1000) / k.meanHoldMs;
              record(run, scenario, system, r.value, { ...r.raw, executors, boundJobsPerSecond: bound, plainJobsPerSecond: plain });
              if (plain !== undefined) record(run, `${prefix}-vs-plain`, system, r.value / plain, { from: scenario, plain });
              record(run, `${prefix}-inflight-max`, system, k.maxInFlight, { from: scenario, limit: spec.limit });
              if (spec.keys === 1) record(run, 'hot-key-bound', system, bound, { from: scenario, limit: spec.limit, meanHoldMs: k.meanHoldMs });
              show(
                run,
                scenario,
                system,
                r.value,
                `; ${plain !== undefined ? `${(r.value / plain).toFixed(2)} × plain (${Math.round(plain)})` : 'no plain drain'}; ${k.executions} attempts over ${k.keysSeen} keys, ` +
                  `max ${k.maxInFlight} of a key in flight (limit ${spec.limit}), mean ${k.meanInFlight.toFixed(2)} in flight, hold ${k.meanHoldMs.toFixed(2)} ms` +
                  (spec.keys === 1 ? `; bound ${spec.limit} / ${k.meanHoldMs.toFixed(2)} ms = ${Math.round(bound)} jobs/s` : '') +
                  cpuText(r.raw),
              );
            });
          }
        }
      }
      if (has('rate')) {
        // A meter whose window holds every start of the drain: one key, 1,000,000 starts an hour
        // (docs/decisions/2026-12-05-rate-meter.md), beside the plain drain of the same run.
        for (const system of rotate(actaSystems, run - 1)) {
          if (!plainDrain.has(`${run}/${system}`)) {
            await attempt(run, 'drain1-fresh', system, async () => {
              const r = await measureDrain(ctx, system, 1, false);
              record(run, 'drain1-fresh', system, r.value, r.raw);
              plainDrain.set(`${run}/${system}`, r.value);
              show(run, 'drain1-fresh', system, r.value, " (the rate-limited drain's reference)" + cpuText(r.raw));
            });
          }
          const plain = plainDrain.get(`${run}/${system}`);
          await attempt(run, 'drain-rate-1m', system, async () => {
            const r = await measureDrain(ctx, system, 1, false, { keys: 1, limit: 1_000_000, ratePerMs: 3_600_000 });
            const k = r.raw.keyed!;
            record(run, 'drain-rate-1m', system, r.value, { ...r.raw, plainJobsPerSecond: plain });
            if (plain !== undefined) record(run, 'rate-1m-vs-plain', system, r.value / plain, { from: 'drain-rate-1m', plain });
            show(run, 'drain-rate-1m', system, r.value, `; ${plain !== undefined ? `${(r.value / plain).toFixed(2)} × plain (${Math.round(plain)})` : 'no plain drain'}; ${k.executions} attempts through one meter of 1,000,000 an hour` + cpuText(r.raw));
          });
        }
      }
      if (has('held')) {
        // A connection holds a transaction (and its snapshot) open while 10 × --jobs drain, 1 process,
        // fresh table: what a long report or an idle-in-transaction session costs each queue, whose
        // dead row versions stay in its tables and indexes until the hold ends.
        const heldCtx: Context = { ...ctx, options: { ...ctx.options, jobs: HELD_FACTOR * ctx.options.jobs, drainTimeoutMs: HELD_TIMEOUT_MS } };
        for (const system of rotate(pgSystems, run - 1)) {
          await attempt(run, 'drain-held', system, async () => {
            const r = await measureDrain(heldCtx, system, 1, false, undefined, true);
            record(run, 'drain-held', system, r.value, r.raw);
            show(run, 'drain-held', system, r.value, `; ${r.raw.jobs} jobs under a held snapshot; ${r.raw.deadTuples} dead row versions at the end` + cpuText(r.raw));
          });
        }
      }
      if (has('warm')) {
        for (const processes of [1, 8] as const) {
          const scenario = `drain${processes}-warm`;
          for (const system of order.filter(warmDrained)) {
            await attempt(run, scenario, system, async () => {
              const r = await measureWarmDrain(ctx, system, processes);
              record(run, scenario, system, r.value, r.raw);
              show(run, scenario, system, r.value, `; warm-up jobs per process ${r.raw.warmupHandled.join(' / ')}; first start ${r.raw.firstStartMs.toFixed(0)} ms after the bulk call (which took ${r.raw.enqueueMs.toFixed(0)} ms)` + cpuText(r.raw));
            });
          }
        }
      }
      if (has('latency')) {
        for (const system of order) {
          await attempt(run, 'latency', system, async () => {
            const r = await measureLatency(ctx, system);
            record(run, 'latency-p50', system, r.p50, r.raw);
            record(run, 'latency-p99', system, r.p99);
            show(run, 'latency-p50', system, r.p50, `; p99 ${r.p99.toFixed(2)} ms; enqueue call p50 ${r.raw.enqueueCallP50Ms.toFixed(2)} ms; IPC rtt ${r.raw.ipcRoundTripMs.toFixed(3)} ms`);
          });
        }
      }
    }
    // Long scenarios: once each.
    if (has('idle')) {
      for (const system of pgSystems) {
        await attempt(1, 'idle-xacts', system, async () => {
          const r = await measureIdle(ctx, system);
          record(1, 'idle-xacts', system, r.value, r.raw);
          show(1, 'idle-xacts', system, r.value);
        });
      }
    }
    if (has('memory')) {
      for (const system of actaSystems) {
        await attempt(1, 'memory-rss', system, async () => {
          const r = await measureMemory(ctx, system);
          record(1, 'memory-rss', system, r.value, r.raw);
          memoryFlat[system] = r.raw.flat;
          show(1, 'memory-rss', system, r.value, `; min ${r.raw.rssMinMiB.toFixed(0)}, last ${r.raw.rssLastMiB.toFixed(0)} MiB; ${r.raw.worked} of ${r.raw.backlog} worked in ${r.raw.seconds.toFixed(1)} s; ${r.raw.flat ? 'flat' : 'GROWING'}`);
        });
      }
    }
    if (has('backpressure')) {
      const { defaultExecutors } = await import('../src');
      for (const system of actaSystems) {
        const executors = SETTINGS[system as 'acta-default' | 'acta-best'].executors ?? defaultExecutors();
        await attempt(1, 'backpressure-claims', system, async () => {
          const r = await measureBackpressure(ctx, system, executors);
          record(1, 'backpressure-claims', system, r.value, r.raw);
          backpressure[system] = { claims: r.raw.claimsDuringStall, bound: r.raw.bound };
          show(1, 'backpressure-claims', system, r.value, `; bound ${r.raw.bound}; RSS ${r.raw.rssBeforeMiB.toFixed(0)} → max ${r.raw.rssMaxDuringMiB.toFixed(0)} MiB; resumed ${r.raw.resumed}`);
        });
      }
    }
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    process.off('uncaughtException', crashed);
    await stores.close();
    await admin.close();
  }

  const rows: Row[] = [];
  for (const s of SCENARIOS) {
    for (const system of [...SYSTEMS, 'floor'] as RowSystem[]) {
      const entry = samples.get(`${s.id}\u0000${system}`);
      if (!entry) continue;
      const sum = summarize(entry.values);
      rows.push({ scenario: s.id, system, unit: s.unit, samples: entry.values, median: sum.median, min: sum.min, max: sum.max, errors: entry.errors });
    }
  }
  meta.finished = new Date().toISOString();
  meta.seconds = Math.round((Date.now() - started.getTime()) / 1000);
  const settings = Object.fromEntries(SYSTEMS.map((s) => [s, SETTINGS[s].label]));
  const result: BenchResult = { meta, settings, rows, targets: checkTargets(rows, { memoryFlat, backpressure, raw }), raw };
  write(result, args.out, started);
  return result;
}

function markdown(result: BenchResult): string {
  const m = result.meta as Record<string, any>;
  const opt = m.options as Options;
  const memory = result.raw.filter((r) => r.scenario === 'memory-rss' && r.details) as { system: string; details: any }[];
  const bp = result.raw.filter((r) => r.scenario === 'backpressure-claims' && r.details) as { system: string; details: any }[];
  const lat = result.raw.filter((r) => r.scenario === 'latency-p50' && r.details) as { details: any }[];
  const ipc = lat.length ? Math.min(...lat.map((l) => l.details.ipcRoundTripMs)) / 2 : NaN;
  const lines = [
    `# ${m.title}`,
    '',
    `${m.started} · ${m.seconds} s · \`${m.command}\` · acta at ${m.git}`,
    '',
    `Machine: ${m.machine.cores} cores (${m.machine.cpuModel}), ${m.machine.memoryGiB} GiB, ${m.machine.os}; Node ${m.machine.node} for every system; ` +
      `PostgreSQL ${m.postgres.server_version} (fsync ${m.postgres.fsync}, synchronous_commit ${m.postgres.synchronous_commit}, shared_buffers ${m.postgres.shared_buffers}, jit ${m.postgres.jit}, autovacuum ${m.postgres.autovacuum}); ` +
      `Redis ${m.redis.version ?? 'n/a'}; graphile-worker ${m.versions['graphile-worker']}, pg-boss ${m.versions['pg-boss']}, bullmq ${m.versions.bullmq}.`,
    '',
    'Median of the runs, (min–max) when there were several; acta cells also show the share of the in-server floor (scenario 7).',
    '',
    markdownTable(result),
    '',
    '## Targets',
    '',
    targetsTable(result.targets),
    '',
    '## Settings',
    '',
    settingsTable(),
    '',
    '## How it was measured',
    '',
    `- Every system runs in worker processes of its own under the same Node binary as the orchestrator; each measurement uses a fresh database (copied from a template with the schema installed: tables never analyzed) or a fresh Redis key prefix; systems are interleaved within each run; ${m.runs} run(s).`,
    `- Enqueue: one bulk call of ${opt.jobs} jobs through the public API (acta enqueueMany, graphile addJobs, pg-boss insert, BullMQ addBulk), timed in the orchestrator.`,
    `- Drain: ${opt.jobs} jobs queued, then the worker process(es) get "go" once loaded; the time runs from "go" (the system's start call is inside it) until the orchestrator's poll sees no job left (it asks the worker processes over IPC every ${opt.pollMs} ms how many handlers they ran, and once they ran all of them, polls the database every 1 ms with one query); every job is then checked completed. "After ANALYZE" ran ANALYZE on the database before "go". Pool per process: the system's own size, capped at ⌊48 / processes⌋ (8 processes: 6).`,
    ...(result.rows.some((r) => r.scenario.endsWith('-warm'))
      ? [
          `- Warm drains (not one of the original targets' measurements): worker processes started and working, which first share ${(2 * opt.jobs).toLocaleString('en-US')} untimed jobs; then the database is vacuumed (what autovacuum does in service, where it is on: without it, acta's claims walked the warm-up's ${(2 * opt.jobs).toLocaleString('en-US')} dead index entries; after 40,000, 1.2 ms per empty claim) and they sit idle 0.5 s; then ${opt.jobs} jobs are queued in one bulk call, and the time runs from the first of them's handler start (noted by the worker process on the machine's monotonic clock) until the poll sees them done, as above: not from the call's return, which for graphile-worker and BullMQ comes after their workers ran most of the jobs (their bulk calls return every job, and the client reads them while the workers run). The same started instance works both batches, as a worker in service does: no start call in the window, pools and connections open, V8's code tiered up. What the 2- and 8-process target is about ("claims do not make workers fight") without each process's start and warm-up inside the window. The table is not fresh (it holds the warm-up's rows, vacuumed, never analyzed) and no transactions are counted; the server CPU includes the bulk enqueue. graphile-worker at its defaults is left out (one job at a time: the warm-up alone would take ~30 s a run).`,
        ]
      : []),
    ...(result.rows.some((r) => r.scenario === 'drain-keys-1000' || r.scenario === 'drain-hot-key')
      ? [
          `- Keyed drains (acta only: graphile-worker, pg-boss and BullMQ have no fleet-wide concurrency keys in their free editions): the plain drain's set-up (1 process, fresh table, the system's executors), the ${opt.jobs.toLocaleString('en-US')} jobs enqueued with \`concurrencyKey\` and the definition declaring \`concurrency: { key, limit }\`: round-robin over 1,000 keys of limit 1, or all on one key of limit 10. Each is divided by the plain 1-process fresh drain of the same run (per run, then the median). Afterwards the attempt ledger (acta.executions joined to acta.jobs) gives, per key, the most attempts whose [claimed_at, finished_at) overlap at one instant (checked against the limit, not assumed) and the mean hold (claim to the start of the completion write); the hot key's bound is 10 ÷ that mean hold: at most 10 attempts in flight, each holding its slot that long (an attempt whose handler is done holds it until its completion is written, so even 8 executors reach 10).`,
        ]
      : []),
    ...(result.rows.some((r) => r.scenario === 'drain-held')
      ? [
          `- Held snapshot (PostgreSQL systems): the 1-process fresh drain of ${(HELD_FACTOR * opt.jobs).toLocaleString('en-US')} jobs while another connection holds a transaction open (REPEATABLE READ, its snapshot taken once the jobs are queued, ended when the worker has stopped; at most ${HELD_TIMEOUT_MS / 60_000} minutes): no row version the drain leaves dead can be vacuumed meanwhile, as under a long report or an idle-in-transaction session. The details give the dead row versions in the database's tables at the end (pg_stat_user_tables).`,
        ]
      : []),
    `- Transactions per job: pg_stat_database.xact_commit of the run's database from before the worker processes start until they have exited (startup and shutdown included), minus the orchestrator's polls, divided by the jobs.`,
    '- CPU per job: over the 1-process drain on the fresh table, from "go" until the poll saw it done, the worker process\'s CPU time and that of every `postgres` process on the machine (for BullMQ, `redis-server`), including backends that exited (their parent\'s cutime), from /proc at 10 ms resolution; the server figure includes the orchestrator\'s polls and the background writers. Shown only when the server runs on this machine.',
    `- Latency: an idle worker, ${opt.latencyJobs} jobs enqueued one at a time ${opt.latencySpacingMs} ms apart, after ${opt.latencyWarmupJobs} untimed jobs sent the same way (a worker process's first jobs pay one-off costs: new connections, the server compiling functions, V8 tiering up) and a settle; both timestamps on the orchestrator's monotonic clock: before the enqueue call, and when the handler's first act (an IPC message) arrives. That includes the enqueue call itself and one IPC hop (≈ ${Number.isFinite(ipc) ? ipc.toFixed(3) : '?'} ms, half the measured round trip).`,
    `- Targets: a ratio ("acta against the same run's figures") is taken in each run that measured both sides, and the table shows the median of those ratios with their range, not the ratio of the medians: this machine's speed changes between runs (the in-server floor differs up to 2 × between runs of one bench), and a figure is compared with its neighbour measured minutes apart. Absolute targets (latency, transactions, idle, memory) use the medians.`,
    `- Idle: transactions per second of an idle worker's database over ${opt.idleSeconds} s after ${opt.idleSettleSeconds} s of settling (each session publishes its counters at most once a second, and an idle session's last ones after 10 s, hence the settle; ±1–2 transactions).`,
    `- Memory: an acta worker with ${opt.memoryJobs.toLocaleString('en-US')} jobs queued (inserted by SQL), its RSS read from /proc every 250 ms for up to ${opt.memorySeconds} s; flat = the last third's max ≤ 1.1 × the middle third's max (the first third is V8's warm-up).`,
    `- Backpressure (docs/DESIGN.md, "The pipeline inside one worker": intake stops when the completed channel is full): an acta worker with a backlog; the orchestrator holds LOCK TABLE acta.executions, acta.succeeded_jobs IN EXCLUSIVE MODE for ${opt.stallMs} ms, so complete_executions blocks; claims during the stall = rows turned Executing; bound = 128 + 2 × executors (the completed channel plus the permits).`,
    '- Floor: the same SQL with no client: one acta.enqueue_jobs call of N elements built in the server, and a DO block looping claim_jobs(…, 128, …) + complete_executions(…) committing per batch.',
  ];
  if (memory.length) {
    lines.push('', '## Memory and backpressure (acta)', '', '| system | backlog | worked | jobs/s | RSS before go | min | max | last | flat? |', '|---|---:|---:|---:|---:|---:|---:|---:|---|');
    for (const r of memory) {
      const d = r.details;
      lines.push(`| ${r.system} | ${d.backlog.toLocaleString('en-US')} | ${d.worked.toLocaleString('en-US')} in ${d.seconds.toFixed(1)} s | ${Math.round(d.jobsPerSecond).toLocaleString('en-US')} | ${d.rssBeforeGoMiB.toFixed(0)} MiB | ${d.rssMinMiB.toFixed(0)} | ${d.rssMaxMiB.toFixed(0)} | ${d.rssLastMiB.toFixed(0)} | ${d.flat ? 'yes' : 'NO'} |`);
    }
  }
  if (bp.length) {
    lines.push('', '| system | executors | stall | claims during stall | bound | RSS before → max during | resumed after |', '|---|---:|---:|---:|---:|---|---|');
    for (const r of bp) {
      const d = r.details;
      lines.push(`| ${r.system} | ${d.executors} | ${d.stallMs} ms | ${d.claimsDuringStall} | ${d.bound} | ${d.rssBeforeMiB.toFixed(0)} → ${d.rssMaxDuringMiB.toFixed(0)} MiB | ${d.resumed ? `yes (${d.completedInTheSecondAfter} completed right after)` : 'NO'} |`);
    }
  }
  const failures = result.raw.filter((r) => r.error);
  if (failures.length || (m.skipped as string[]).length) {
    lines.push('', '## Failures and skips', '');
    for (const s of m.skipped as string[]) lines.push(`- skipped ${s}`);
    for (const f of failures) lines.push(`- run ${f.run}, ${f.scenario}, ${f.system}: ${String(f.error).split('\n')[0]}`);
  }
  lines.push('', `Raw samples: the JSON file beside this one. Chart: the SVG file beside this one.`, '');
  return lines.join('\n');
}

function write(result: BenchResult, out: string, started: Date): void {
  fs.mkdirSync(out, { recursive: true });
  const stamp = started.toISOString().replace(/[:.]/g, '-');
  const md = markdown(result);
  const svg = svgChart(result);
  const json = JSON.stringify(result, null, 1);
  for (const name of [stamp, 'latest']) {
    fs.writeFileSync(path.join(out, `${name}.md`), md);
    fs.writeFileSync(path.join(out, `${name}.json`), json);
    fs.writeFileSync(path.join(out, `${name}.svg`), svg);
  }
  process.stdout.write(`${md}\n`);
  log(`bench: wrote ${path.join(out, `${stamp}.{md,json,svg}`)} and latest.{md,json,svg}`);
}

/** Rewrites the Markdown and the chart of an earlier run from its JSON (targets recomputed from the rows and raw details). */
export function rereport(jsonFile: string): void {
  const result = JSON.parse(fs.readFileSync(jsonFile, 'utf8')) as BenchResult;
  const memoryFlat: Record<string, boolean> = {};
  const backpressure: Record<string, { claims: number; bound: number }> = {};
  for (const r of result.raw) {
    const d = r.details as Record<string, any> | undefined;
    if (!d) continue;
    if (r.scenario === 'memory-rss' && Array.isArray(d.samples)) {
      const f = flatness((d.samples as { rssMiB: number }[]).slice(1).map((x) => x.rssMiB));
      Object.assign(d, { middleThirdMaxMiB: f.middleMax, lastThirdMaxMiB: f.lastMax, flat: f.flat });
      delete d.firstHalfMaxMiB;
      delete d.secondHalfMaxMiB;
      memoryFlat[r.system] = f.flat;
    }
    if (r.scenario === 'backpressure-claims') backpressure[r.system] = { claims: d.claimsDuringStall, bound: d.bound };
  }
  result.targets = checkTargets(result.rows, { memoryFlat, backpressure, raw: result.raw });
  write(result, path.dirname(path.resolve(jsonFile)), new Date(String(result.meta.started)));
}

if (require.main === module && process.argv[2] === '--report') {
  rereport(process.argv[3]);
} else if (require.main === module) {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : err);
      process.exit(1);
    },
  );
}
