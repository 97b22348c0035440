/**
 * A database server that takes the TCP connection and never answers (a stopped postmaster, an
 * overloaded host, a silent network), played by a listener of the test's own that accepts and
 * holds every connection; the real CLI against it (docs/operating.md, "Workers in production"):
 * - a command fails with the connect timeout, naming the database it tried (was: it hung);
 * - `acta worker` exits 1 at its start timeout with its `acta: …` line (was: it logged "giving up"
 *   and stayed, its Db's close waiting for a connect that never ended);
 * - SIGTERM while its start waits exits 0 at once (was: it waited for that connect too).
 * A refused connection names the database as well; a bad `connect_timeout` is refused.
 */
import { execFile } from 'node:child_process';
import * as net from 'node:net';
import { eventsFile, exitWithin, killAll, ROOT, spawnWorker } from './harness';
import { waitFor } from '../helpers/wait';

let silent: net.Server;
const held: net.Socket[] = [];
let port = 0;
beforeAll(async () => {
  silent = net.createServer((socket) => held.push(socket)); // accepted, never answered
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  port = (silent.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await killAll();
  for (const socket of held) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

/** `acta <args>` on `url`: its exit code (-1 when the 60 s guard killed it: a hang) and stderr. */
function acta(args: string[], url: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/acta.js', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: url, ACTA_LOG_LEVEL: 'silent' }, timeout: 60_000 }, (err, _stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr });
    });
  });
}

test('a command against a server that never answers fails with the connect timeout (connect_timeout), naming the database with its password masked', async () => {
  const url = `postgres://acta:secret@127.0.0.1:${port}/queue?connect_timeout=2`;
  for (const args of [['jobs', 'list'], ['enqueue', 'x', '{}'], ['why', '1']]) {
    const run = await acta(args, url);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^acta: the server did not answer the connect within 2000 ms \(connect_timeout in the connection string sets it\): timeout expired \(the database postgres:\/\/acta:\*\*\*@127\.0\.0\.1:\d+\/queue\?connect_timeout=2 was not reached: is the server up and reachable, and DATABASE_URL right\?\)/);
    expect(run.stderr).not.toContain('secret');
  }
}, 120_000);

test('a refused connection names the database too; a connect_timeout that is not a number is refused before any connect', async () => {
  const closed = await new Promise<number>((resolve) => {
    const probe = net.createServer();
    probe.listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(free));
    });
  });
  const refused = await acta(['jobs', 'list'], `postgres://acta:secret@127.0.0.1:${closed}/queue`);
  expect(refused).toMatchObject({ code: 1, stderr: expect.stringMatching(/^acta: connect ECONNREFUSED 127\.0\.0\.1:\d+ \(the database postgres:\/\/acta:\*\*\*@127\.0\.0\.1:\d+\/queue was not reached/) });
  const bad = await acta(['jobs', 'list'], `postgres://acta@127.0.0.1:${port}/queue?connect_timeout=soon`);
  expect(bad).toMatchObject({ code: 1, stderr: 'acta: connect_timeout in the connection string is a number of seconds (0: no limit), got "soon"\n' });
});

test('`acta worker` against a server that never answers exits 1 at its start timeout, with its `acta:` line saying the connect had no answer before its connect_timeout', async () => {
  const w = spawnWorker({ dbUrl: `postgres://acta:secret@127.0.0.1:${port}/queue`, events: eventsFile(), args: ['--start-timeout', '3000'] });
  const exit = await exitWithin(w, 45_000);
  expect(exit).toEqual({ code: 1, signal: null });
  // The start timeout comes before the connect's own (10 s): no error yet, and it says why (was: "last error: no answer yet").
  expect(w.output()).toMatch(
    /\nacta: the worker could not reach the database within 3000 ms of its start \(no error yet: the connect had no answer in that time; it fails only at connect_timeout, 10000 ms here, set in the connection string\); check the database address/,
  );
  expect(w.lines.at(-1)?.msg).toBe('worker start: the database was not reached within startTimeoutMs; giving up');
}, 60_000);

test('SIGTERM while the start waits for a server that never answers exits 0 at once, not after the connect (here without a limit)', async () => {
  const before = held.length;
  const w = spawnWorker({ dbUrl: `postgres://acta:secret@127.0.0.1:${port}/queue?connect_timeout=0`, events: eventsFile(), args: ['--start-timeout', '120000'] });
  await waitFor(() => held.length > before || undefined, 'the worker to connect', 20_000);
  w.kill('SIGTERM');
  const exit = await exitWithin(w, 45_000);
  expect(exit).toEqual({ code: 0, signal: null });
  expect(w.lines.map((l) => l.msg)).toEqual(['signal: stopping gracefully (send it again to exit at once)']);
}, 60_000);
