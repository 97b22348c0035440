/**
 * A connection string naming a database the server does not have (a typo, a database not created
 * yet), on a server of the file's own: `acta worker` stops at once (3D000 is no outage: waiting
 * does not create it) and, as every command, says which database on which server, and the fix.
 */
import { execFile } from 'node:child_process';
import { withDatabase } from '../helpers/db';
import { eventsFile, exitWithin, ROOT, spawnWorker, useFaultServer } from './harness';

const server = useFaultServer();

const said = (name: string, port: number) =>
  `acta: database "${name}" does not exist on the server at 127.0.0.1:${port}: create it (createdb ${name}, or CREATE DATABASE), then run acta migrate; or correct the database name in the connection string (DATABASE_URL)`;

test('`acta worker` on a database the server lacks exits 1 at once, not at its start timeout, naming the database, the server and the fix', async () => {
  const w = spawnWorker({ dbUrl: withDatabase(server.url, 'acta_no_such_db'), events: eventsFile(), args: ['--start-timeout', '120000'] });
  // Well before the start timeout: the error is not repeated as transient.
  expect(await exitWithin(w, 60_000)).toEqual({ code: 1, signal: null });
  expect(w.output()).toContain(said('acta_no_such_db', server.port));
  expect(w.lines.filter((l) => l.msg.startsWith('worker start: the database has not been reached'))).toEqual([]);
}, 90_000);

test('`acta jobs list` and `acta migrate` say the same', async () => {
  for (const args of [['jobs', 'list'], ['migrate']]) {
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, ['bin/acta.js', ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: withDatabase(server.url, 'acta_no_such_db'), ACTA_LOG_LEVEL: 'silent' }, timeout: 60_000 }, (err, _stdout, stderr) =>
        resolve({ code: err ? Number(err.code) : 0, stderr }),
      ),
    );
    expect(run.code).toBe(1);
    expect(run.stderr.startsWith(said('acta_no_such_db', server.port))).toBe(true);
  }
}, 90_000);
