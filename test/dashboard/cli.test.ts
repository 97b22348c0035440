// `acta dashboard` as a user runs it (the built bin/acta.js: npm run build first): refused beyond
// the loopback without auth before anything connects; a port in use exits 1 leaving nothing open;
// on the loopback it serves until SIGTERM.
import { execFile, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { useTestDatabase } from '../helpers/db';
import { waitFor } from '../helpers/wait';

const ROOT = path.join(__dirname, '..', '..');
const BIN = path.join(ROOT, 'bin', 'acta.js');
const { tdb } = useTestDatabase();

test('--host 0.0.0.0 without --token or --basic: exit 1 with the typed message, before connecting', async () => {
  const out = await new Promise<{ code: number; stderr: string }>((resolve) =>
    execFile(process.execPath, [BIN, 'dashboard', '--host', '0.0.0.0'], { env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, timeout: 30_000 }, (err, _stdout, stderr) =>
      resolve({ code: err ? Number(err.code) : 0, stderr }),
    ),
  );
  expect(out.code).toBe(1);
  expect(out.stderr).toContain('acta: the dashboard listens on 0.0.0.0, beyond this machine: give --token or --basic');
  expect(out.stderr).not.toContain('ECONNREFUSED');
});

test('a port in use: exit 1 with the message, and nothing left open (no pool timer) after it', async () => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const { port } = taken.address() as net.AddressInfo;
  try {
    // The preload prints what still keeps the process alive once the message is out: before the
    // fix the Db stayed open, and its pool's idle timer held the exit back for ~10 s.
    const preload = path.join(ROOT, 'test', 'fixtures', 'lingering.cjs');
    const out = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, ['-r', preload, BIN, 'dashboard', '--port', String(port)], { env: { ...process.env, DATABASE_URL: tdb.url }, timeout: 60_000 }, (err, _stdout, stderr) =>
        resolve({ code: err ? Number(err.code) : 0, stderr }),
      ),
    );
    expect(out.code).toBe(1);
    expect(out.stderr).toContain(`acta: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
    const alive = /still alive: (\[.*\])/.exec(out.stderr)?.[1];
    expect(alive).toBeDefined();
    expect(JSON.parse(alive as string)).not.toContain('Timeout');
  } finally {
    await new Promise((resolve) => taken.close(resolve));
  }
});

test('on the loopback with a token: the page needs the token, and SIGTERM stops it with exit 0', async () => {
  const child = spawn(process.execPath, [BIN, 'dashboard', '--port', '0', '--token', 'cli-token-123'], { env: { ...process.env, DATABASE_URL: tdb.url, ACTA_DASHBOARD_TOKEN: '' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await waitFor(() => /acta dashboard: (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(stderr)?.[1], 'the dashboard to listen', 30_000);
  expect((await fetch(`${url}/`)).status).toBe(401);
  const page = await fetch(`${url}/`, { headers: { authorization: 'Bearer cli-token-123' } });
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('<h1>Overview</h1>');
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});
