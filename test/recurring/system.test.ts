// acta's own recurring definitions on a real database (src/recurring/system.ts): a worker asked for
// `retention` and `alerts` declares sys.retention and sys.alerts as schedules whose payloads are its
// settings; a triggered fire of each runs on that worker (retention deletes a finished job past its
// age; alerts raise a dead worker); `acta_alert` is served with the worker's metrics; a worker not
// asked declares neither.
import { randomUUID } from 'node:crypto';
import { ConfigError, createClient, createWorker, defineJob } from '../../src';
import { MAX_AGE_MS } from '../../src/recurring/batches';
import { useTestDatabase } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db } = useTestDatabase();

const noop = defineJob({ name: 'noop', handler: () => null });

it('retention and alerts asked: both declared with their settings as payloads; a triggered fire of each runs; acta_alert is among the metrics', async () => {
  const namespace = `sys-${randomUUID()}`;
  const worker = createWorker({ db, namespace, definitions: [noop], logger: silentLogger, heartbeatIntervalMs: 1_000, retention: { succeededMs: 60_000 }, alerts: { deadWindowMs: 600_000 } });
  await worker.start();
  try {
    const client = createClient({ db, namespace, definitions: [noop] });
    const schedules = await client.schedules.list();
    expect(schedules.map((s) => s.name).sort()).toEqual(['sys.alerts', 'sys.retention']);
    const { rows: payloads } = await db.query<{ name: string; payload: unknown; priority: number }>('select name, payload, priority from acta.schedules where namespace = $1 order by name', [namespace]);
    // sys.alerts' fires at the highest priority: a backlog, which it exists to report, does not hold them back.
    expect(payloads).toEqual([
      { name: 'sys.alerts', payload: { deadWindowMs: 600_000 }, priority: 2_147_483_647 },
      { name: 'sys.retention', payload: { succeededMs: 60_000 }, priority: 0 },
    ]);

    // A succeeded job 2 minutes old (past the 1 minute asked) and a fresh one; a worker dead for good.
    const { rows: old } = await db.query<{ id: string }>(
      `insert into acta.jobs (namespace, definition, payload, status, finished_at) values ($1, 'noop', 'null', 'succeeded', now() - interval '2 minutes'), ($1, 'noop', 'null', 'succeeded', now()) returning id::text as id`,
      [namespace],
    );
    await db.query(
      `insert into acta.workers (id, namespace, hostname, pid, status, definitions, started_at, last_heartbeat_at) values ($1, $2, 'h', 1, 'dead', '{noop}', now() - interval '5 minutes', now() - interval '5 minutes')`,
      [randomUUID(), namespace],
    );
    expect(await client.schedules.trigger('sys.retention')).not.toBeNull();
    expect(await client.schedules.trigger('sys.alerts')).not.toBeNull();
    await waitFor(async () => (await client.getJob(old[0].id)) === null, 'the old succeeded job deleted by sys.retention');
    expect((await client.getJob(old[1].id))?.status).toBe('succeeded');
    await waitFor(async () => (await db.query('select 1 from acta.alerts where namespace = $1 and rule = $2', [namespace, 'worker_dead'])).rows.length === 1, 'sys.alerts raising worker_dead');
    const metrics = await worker.metrics.registry.metrics();
    expect(metrics).toMatch(/acta_alert\{rule="worker_dead",subject="[0-9a-f-]+"\} 1/);
  } finally {
    await worker.stop();
  }
}, 60_000);

it('a worker not asked declares neither; bad settings are a ConfigError before anything is written', async () => {
  const namespace = `sys-${randomUUID()}`;
  const worker = createWorker({ db, namespace, definitions: [noop], logger: silentLogger });
  await worker.start();
  await worker.stop();
  expect((await db.query('select name from acta.schedules where namespace = $1', [namespace])).rows).toEqual([]);
  expect(() => createWorker({ db, namespace, definitions: [noop], retention: { succeededMs: -1 } })).toThrow(ConfigError);
  expect(() => createWorker({ db, namespace, definitions: [noop], alerts: { nope: 1 } as never })).toThrow(ConfigError);
  // An array is no object of settings, as retention's and outbox's refuse it (it declared sys.alerts with the defaults).
  expect(() => createWorker({ db, namespace, definitions: [noop], alerts: [] as never })).toThrow(/alerts must be true, false or an object of thresholds and onAlert/);
  // An age past 100 years is refused: subtracted from now() in SQL it would fail every pass.
  expect(() => createWorker({ db, namespace, definitions: [noop], retention: { failedMs: 2 ** 52 } })).toThrow(/failedMs of the sys.retention payload must be an integer 0..3155760000000/);
  expect(() => createWorker({ db, namespace, definitions: [noop], alerts: { deadWindowMs: 2 ** 52 } })).toThrow(ConfigError);
  // onAlert's jobs carry the alert payload: acta's own definitions check theirs and would fail every
  // one (docs/alerts.md), on this worker or another.
  for (const onAlert of ['sys.retention', 'sys.alerts', 'sys.outbox', 'sys.other']) {
    expect(() => createWorker({ db, namespace, definitions: [noop], alerts: { onAlert } })).toThrow(/onAlert must name a definition of yours/);
  }
  expect(() => createWorker({ db, namespace, definitions: [noop], retention: true, alerts: { onAlert: 'sys.retention' } })).toThrow(ConfigError);
  const { rows } = await db.query<{ n: number }>('select acta.prune_jobs($1, $2, $2, $2, 10) as n', [namespace, MAX_AGE_MS]);
  expect(rows).toEqual([{ n: 0 }]);
});
