/**
 * SIGINT and SIGTERM to real `acta worker` processes at the edges of their life: during the start's
 * slow parts (a new embedded folder's connect), and a second signal after the stop completed
 * (docs/operating.md, "Workers in production", Signals: graceful, exit 0; a second signal exits 1
 * only while something is still held).
 */
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createTestDatabase, type TestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';
import { runActa, spawnActa } from '../helpers/cli';
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});

/** `acta worker <module>` with `env` (DATABASE_URL and ACTA_DATA_DIR as given, nothing inherited). */
function worker(module: string, env: Record<string, string>) {
  const base = { ...process.env };
  delete base.DATABASE_URL;
  delete base.ACTA_DATA_DIR;
  return spawnActa(['worker', module, '--heartbeat', '1000'], { ...base, ACTA_LOG_LEVEL: 'info', ...env }, children);
}

test('SIGINT while `acta worker` connects to a new embedded folder ends the start cleanly: exit 0, the folder not held', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-signal-'));
  const dataDir = path.join(dir, 'data');
  try {
    const w = worker('test/fixtures/cli-jobs.js', { ACTA_DATA_DIR: dataDir });
    // The connect has begun once the folder's lock is taken; a new folder's takes seconds more.
    await waitFor(() => (fs.existsSync(path.join(dataDir, 'acta.lock')) ? true : undefined), 'the worker to take the folder', 20_000, 20);
    w.child.kill('SIGINT');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.output()).toContain('signal: stopping gracefully');
    expect(w.output()).not.toContain('acta worker running');
    // Nothing held: another process opens the folder at once.
    const base = { ...process.env };
    delete base.DATABASE_URL;
    const sql = await runActa(['sql', 'select 1 as one'], { ...base, ACTA_DATA_DIR: dataDir }, 60_000);
    expect(sql).toEqual({ code: 0, stdout: '{"one":1}\n', stderr: '' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}, 90_000);

describe('on a server', () => {
  let tdb: TestDatabase;
  beforeAll(async () => {
    tdb = await createTestDatabase({ migrate: true });
  });
  afterAll(async () => {
    await tdb.drop();
  });

  test('a second signal while `acta worker` closes after a completed stop does not turn its exit 0 into 1', async () => {
    const w = worker('test/fixtures/slow-close-jobs.js', { DATABASE_URL: tdb.url });
    await waitFor(() => (w.output().includes('acta worker running') ? true : undefined), 'the worker to run', 30_000, 20);
    w.child.kill('SIGTERM');
    await waitFor(() => (w.output().includes('pool closing') ? true : undefined), 'the final close', 30_000, 5);
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.output()).not.toContain('second signal');
  }, 60_000);
});
