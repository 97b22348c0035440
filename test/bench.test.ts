/**
 * Smoke test of the benchmark (docs/performance.md): builds bench/, runs
 * `dist/bench/run.js --quick` under the Node 22 binary the bench uses, for every system and every
 * scenario (the keyed drains for acta), against the tests' PostgreSQL server (ACTA_TEST_DATABASE_URL) and Redis
 * (ACTA_TEST_REDIS_URL), and checks the JSON it writes: a row per system × scenario, each with
 * finite, positive numbers. No timing is asserted: the numbers of a quick run on a shared machine
 * mean nothing; this only keeps the bench from rotting. BullMQ is left out (and the reason printed)
 * only when Redis cannot be reached. Then `dist/bench/stages.js` (the latency enqueue → handler
 * start split by stage) at a tiny size, for the same reason.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isActaPolicySystem, SYSTEMS } from '../bench/common';
import { type BenchResult, expectedRows, MAY_BE_ZERO } from '../bench/results';
import type { StageSample } from '../bench/stages';

const root = path.join(__dirname, '..');
const node22 = path.join(root, 'bench', 'node_modules', 'node-22', 'bin', 'node');
// A guard against a hung run, not a speed limit: alone on 2 idle cores the quick run takes ~75 s;
// in CI it shares them with the other suites (it was killed at 85 s there once, mid-run).
const BENCH_TIMEOUT_MS = 300_000;

function run(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: root, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      const killed = err && (err as { killed?: boolean }).killed ? `\n(killed after ${timeoutMs / 1000} s)` : '';
      resolve({ code, stdout, stderr: stderr + killed });
    });
  });
}

beforeAll(async () => {
  const build = await run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'bench/tsconfig.json'], process.env, 60_000);
  if (build.code !== 0) throw new Error(`bench build failed:\n${build.stdout}\n${build.stderr}`);
}, 90_000);

test('npm run bench --quick: a row per system × scenario, with positive numbers', async () => {
  expect(fs.existsSync(node22)).toBe(true); // bench/package.json's node-22 (npm test installs it): graphile-worker 0.18 and pg-boss 12 need Node ≥ 22

  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-bench-smoke-'));
  try {
    const env = {
      ...process.env,
      BENCH_DATABASE_URL: process.env.ACTA_TEST_DATABASE_URL,
      BENCH_REDIS_URL: process.env.ACTA_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    };
    const bench = await run(node22, ['--disable-warning=ExperimentalWarning', 'dist/bench/run.js', '--quick', '--out', out], env, BENCH_TIMEOUT_MS);
    if (bench.code !== 0) throw new Error(`bench --quick failed (${bench.code}):\n${bench.stderr.slice(-4000)}`);

    const result = JSON.parse(fs.readFileSync(path.join(out, 'latest.json'), 'utf8')) as BenchResult;
    const systems = result.meta.systems as (typeof SYSTEMS)[number][];
    const skipped = result.meta.skipped as string[];
    if (skipped.length > 0) console.warn(`bench smoke test: ${skipped.join('; ')}`);
    // Every peer runs unless its store cannot be reached (only Redis can be missing here).
    expect(systems).toEqual(SYSTEMS.filter((s) => s !== 'bullmq' || skipped.length === 0));

    const failures = result.raw.filter((r) => r.error).map((r) => `${r.scenario} ${r.system}: ${r.error}`);
    expect(failures).toEqual([]);
    for (const { scenario, system } of expectedRows(systems)) {
      const row = result.rows.find((r) => r.scenario === scenario && r.system === system);
      expect({ scenario, system, found: row !== undefined }).toEqual({ scenario, system, found: true });
      expect(row!.samples.length).toBeGreaterThan(0);
      for (const value of row!.samples) {
        expect(Number.isFinite(value)).toBe(true);
        if (MAY_BE_ZERO.has(scenario)) expect(value).toBeGreaterThanOrEqual(0);
        else expect({ scenario, system, value: value > 0 }).toEqual({ scenario, system, value: true });
      }
    }
    // CPU per job: read from /proc, so present only when the server runs on this machine (as the
    // test servers do); at the quick sizes a 10 ms tick may round a figure down to 0.
    for (const scenario of ['cpu-worker', 'cpu-server']) {
      const row = result.rows.find((r) => r.scenario === scenario && r.system === 'acta-default');
      expect({ scenario, found: row !== undefined }).toEqual({ scenario, found: true });
      for (const value of row!.samples) expect(Number.isFinite(value) && value >= 0).toBe(true);
    }
    // Keyed drains (acta only): the attempt ledger's most attempts of one key in flight at once is
    // within the key's limit (1 for the 1,000 keys, 10 for the hot key), and the hot key's bound was
    // computed from it.
    for (const system of systems.filter(isActaPolicySystem)) {
      for (const [scenario, limit] of [['keys-1000-inflight-max', 1], ['hot-key-inflight-max', 10]] as const) {
        const row = result.rows.find((r) => r.scenario === scenario && r.system === system)!;
        for (const value of row.samples) expect({ scenario, system, withinLimit: Number.isInteger(value) && value >= 1 && value <= limit }).toEqual({ scenario, system, withinLimit: true });
      }
    }
    const markdown = fs.readFileSync(path.join(out, 'latest.md'), 'utf8');
    expect(markdown).toContain('| scenario | unit |');
    expect(markdown).toContain('## Targets');
    expect(fs.readFileSync(path.join(out, 'latest.svg'), 'utf8')).toMatch(/^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  } finally {
    fs.rmSync(out, { recursive: true, force: true });
  }
}, BENCH_TIMEOUT_MS + 60_000);

test('bench/stages.ts: each timed job split into its stages, in the order they happen', async () => {
  const env = { ...process.env, BENCH_DATABASE_URL: process.env.ACTA_TEST_DATABASE_URL };
  const stages = await run(node22, ['dist/bench/stages.js', '--jobs', '5', '--warmup', '2', '--spacing', '5', '--json'], env, 60_000);
  if (stages.code !== 0) throw new Error(`stages failed (${stages.code}):\n${stages.stderr.slice(-4000)}`);
  const samples = JSON.parse(stages.stdout) as StageSample[];
  expect(samples).toHaveLength(5);
  for (const s of samples) {
    for (const value of [s.call, s.claimSent, s.claimBack, s.handler]) expect(Number.isFinite(value)).toBe(true);
    expect(s.call).toBeGreaterThan(0);
    // The claim that returned the job was answered before its handler started, and after the
    // enqueue call began (the job did not exist before); no order of NOTIFY and claim is asserted
    // (a claim already in flight may find the job first).
    expect(s.claimBack).toBeGreaterThan(0);
    expect(s.claimBack).toBeGreaterThanOrEqual(s.claimSent);
    expect(s.handler).toBeGreaterThanOrEqual(s.claimBack);
  }
}, 90_000);
