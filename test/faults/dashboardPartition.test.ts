/**
 * The dashboard across a SILENT network partition to its PostgreSQL (the test's own proxy,
 * partitionProxy.ts, in front of a server of the file's own): a page request or an action during
 * the partition answers 503 with a clear message within its statement deadline, where it hung for
 * good holding a pool connection; after the heal, pages work again (docs/dashboard.md).
 */
import { spawn } from 'node:child_process';
import { createPgDb } from '../../src/db/pgDb';
import { createCsrf } from '../../src/ops/dashboard/security';
import { startDashboard } from '../../src/ops/dashboard/server';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';
import { ROOT, useFaultServer } from './harness';
import { usePartitionProxy } from './partitionProxy';

const server = useFaultServer();
const partitionProxy = usePartitionProxy(server);

/** A request whose answer (status and body) must come within `guardMs`, else 'hung'. */
async function request(url: string, guardMs: number, init: RequestInit = {}): Promise<{ status: number; body: string } | 'hung'> {
  try {
    const res = await fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(guardMs) });
    return { status: res.status, body: await res.text() };
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return 'hung';
    throw err;
  }
}

test('`acta dashboard` (its default deadline, 30 s): a page during a partition answers 503 saying the database did not answer; after the heal pages work again', async () => {
  const child = spawn(process.execPath, ['bin/acta.js', 'dashboard', '--port', '0'], { cwd: ROOT, env: { ...process.env, DATABASE_URL: partitionProxy().through(server.dbUrl), ACTA_LOG_LEVEL: 'silent' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    const url = await waitFor(() => /acta dashboard: (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(stderr)?.[1], 'the dashboard to listen', 30_000);
    expect(await request(`${url}/`, 30_000)).toMatchObject({ status: 200 });
    partitionProxy().partition();
    const during = await request(`${url}/jobs`, 60_000);
    expect(during).toMatchObject({ status: 503, body: expect.stringMatching(/the database did not answer within 30000 ms \(the error is in the dashboard.* log\): reload once it answers/) });
    partitionProxy().heal('new'); // the old flows stay silent for good
    expect(await request(`${url}/`, 30_000)).toMatchObject({ status: 200, body: expect.stringContaining('<h1>Overview</h1>') });
    expect(await request(`${url}/jobs`, 30_000)).toMatchObject({ status: 200 });
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
}, 120_000);

test('startDashboard with statementDeadlineMs: an action during a partition answers 503 within the deadline, saying it may have been done; the next after the heal acts', async () => {
  const db = createPgDb({ connectionString: partitionProxy().through(server.dbUrl) });
  const csrf = createCsrf();
  const dashboard = await startDashboard({ db, port: 0, csrf, statementDeadlineMs: 2_000, logger: silentLogger });
  const resume = () =>
    request(`${dashboard.url}/actions/resume`, 20_000, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: csrf.tokenFor('local'), ns: 'default', back: '/' }).toString(),
    });
  try {
    expect(await request(`${dashboard.url}/`, 20_000)).toMatchObject({ status: 200 });
    partitionProxy().partition();
    expect(await resume()).toMatchObject({ status: 503, body: expect.stringMatching(/the database did not answer within 2000 ms .*: reload once it answers; the action may have been done: check the page first/) });
    expect(await request(`${dashboard.url}/workers`, 20_000)).toMatchObject({ status: 503 });
    // A partition of more than 10 s: the pool has closed its idle connections (pg's idleTimeoutMillis),
    // so none still silent is left for the next request. (At the default deadline, 30 s, any request
    // made during a partition outlasts that.)
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    partitionProxy().heal('new');
    expect(await resume()).toMatchObject({ status: 303 });
    expect(await request(`${dashboard.url}/workers`, 20_000)).toMatchObject({ status: 200 });
  } finally {
    await dashboard.close();
    await db.close();
  }
}, 60_000);
