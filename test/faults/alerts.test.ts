/**
 * sys.alerts' worker_dead with real worker processes on a real server (docs/alerts.md, "Raised
 * once, resolved once"): of three workers of test/fixtures/system-worker.js (H = 1 s, a dead
 * window of 15 s, onAlert 'task'), two are killed -9; the test triggers evaluations, two at a time,
 * about every 400 ms, and restarts the server once both alerts are open. Each killed worker's
 * alert is raised once (after recovery marked it dead), resolved once (when its last heartbeat
 * left the window) and not raised again; the live worker has none; one 'alert raised' and one
 * 'alert resolved' log line and one onAlert job per change.
 */
import { createClient } from '../../src';
import { createPgDb } from '../../src/db/pgDb';
import { sleep, spawnWorker, useFaultServer, type WorkerProcess } from './harness';
import { waitFor } from '../helpers/wait';

const DEAD_WINDOW_MS = 15_000;
const server = useFaultServer();

function startWorker(): WorkerProcess {
  const options = { alerts: { deadWindowMs: DEAD_WINDOW_MS, onAlert: 'task' } };
  return spawnWorker({ dbUrl: server.dbUrl, events: '/dev/null', script: 'test/fixtures/system-worker.js', env: { WORKER_OPTIONS: JSON.stringify(options), ACTA_LOG_LEVEL: 'info' } });
}

interface AlertRow {
  subject: string;
  raised_at: Date;
  resolved_at: Date | null;
  heartbeat: Date;
}

test('two of three workers killed -9, a server restart while their alerts are open: worker_dead raised once and resolved once for each, never for the live one', async () => {
  const workers = [startWorker(), startWorker(), startWorker()];
  const [aId, bId, cId] = await Promise.all(workers.map((w) => w.workerId()));
  const db = createPgDb({ connectionString: server.dbUrl, max: 2 });
  const client = createClient({ db, namespace: 'default' });
  const alerts = () =>
    server.query<AlertRow>(
      `select a.subject, a.raised_at, a.resolved_at, w.last_heartbeat_at as heartbeat
       from acta.alerts a left join acta.workers w on w.id::text = a.subject where a.rule = 'worker_dead' order by a.raised_at`,
    );
  let evaluating = true;
  const evaluations = (async () => {
    while (evaluating) {
      await Promise.all([1, 2].map(() => client.schedules.trigger('sys.alerts').catch(() => undefined)));
      await sleep(400);
    }
  })();

  workers[0].kill('SIGKILL');
  workers[1].kill('SIGKILL');
  await Promise.all([workers[0].exited, workers[1].exited]);
  await waitFor(async () => (await alerts()).length === 2 || undefined, 'both worker_dead alerts to be raised', 30_000, 100);
  const restartAt = Date.now();
  await server.stop();
  await sleep(1_000);
  await server.start();
  await waitFor(async () => (await alerts()).every((a) => a.resolved_at !== null) || undefined, 'both alerts to be resolved', 40_000, 100);
  await sleep(3_000); // more evaluations after the resolve: none raises again
  evaluating = false;
  await evaluations;
  await db.close();

  const rows = await alerts();
  expect(rows.map((a) => a.subject).sort()).toEqual([aId, bId].sort());
  const dead = await server.query<{ id: string; status: string }>('select id, status from acta.workers where id = any ($1)', [[aId, bId, cId]]);
  expect(Object.fromEntries(dead.map((d) => [d.id, d.status]))).toEqual({ [aId]: 'dead', [bId]: 'dead', [cId]: 'alive' });
  for (const a of rows) {
    // Resolved when its last heartbeat left the window, not before.
    expect(a.resolved_at!.getTime() - a.heartbeat.getTime()).toBeGreaterThanOrEqual(DEAD_WINDOW_MS);
    expect(a.raised_at.getTime() - a.heartbeat.getTime()).toBeLessThan(DEAD_WINDOW_MS);
    // The restart fell while it was open.
    expect(a.raised_at.getTime()).toBeLessThan(restartAt);
    expect(a.resolved_at!.getTime()).toBeGreaterThan(restartAt);
  }
  const lines = workers.flatMap((w) => w.lines).filter((l) => l.rule === 'worker_dead');
  const changes = (msg: string) => lines.filter((l) => l.msg === msg).map((l) => l.subject).sort();
  expect(changes('alert raised')).toEqual([aId, bId].sort());
  expect(changes('alert resolved')).toEqual([aId, bId].sort());
  const jobs = await server.query<{ subject: string; change: string }>(
    `select payload ->> 'subject' as subject, payload ->> 'change' as change from acta.all_jobs where definition = 'task' and payload ->> 'rule' = 'worker_dead' order by 1, 2`,
  );
  expect(jobs).toEqual([aId, bId].sort().flatMap((subject) => [{ subject, change: 'raised' }, { subject, change: 'resolved' }]));

  workers[2].kill('SIGTERM');
  expect((await workers[2].exited).code).toBe(0);
}, 120_000);
