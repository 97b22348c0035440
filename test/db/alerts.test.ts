// sys.alerts on a real server (docs/alerts.md): each rule raised once per incident and resolved
// once when its condition clears, across repeated evaluations; the onAlert job enqueued exactly once
// per change, in the evaluation's transaction; the acta_alert metric and the log lines.
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Registry } from 'prom-client';
import { ConfigError, createWorker, defineJob } from '../../src';
import { type AlertRow, evaluateAlerts } from '../../src/db/alerts';
import { sqlLedger } from '../../src/ledger';
import { alertMetric, alertsDefinition, alertThresholds, DEFAULT_FAILURE_WINDOW_MS, DEFAULT_READY_AGE_MS, DEFAULT_SCHEDULE_LATE_MS, runAlertsPass } from '../../src/recurring/alerts';
import { Client } from 'pg';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase();
let ns: string;
beforeEach(() => {
  ns = `alerts-${randomUUID().slice(0, 8)}`;
});

const evaluate = (onAlert?: string) => runAlertsPass(sqlLedger(db), ns, alertThresholds({}), { onAlert });
/** The changes of one evaluation, as [change, rule, subject]. */
const changes = (rows: AlertRow[]) => rows.filter((r) => r.change !== null).map((r) => [r.change, r.rule, r.subject]);

async function worker(status: 'alive' | 'dead', definitions: string[], heartbeatAgoMs = 0): Promise<string> {
  const id = randomUUID();
  await db.query(
    `insert into acta.workers (id, namespace, hostname, pid, definitions, status, last_heartbeat_at)
     values ($1, $2, 'host', 1, $3, $4, now() - $5::bigint * interval '1 millisecond')`,
    [id, ns, definitions, status, heartbeatAgoMs],
  );
  return id;
}
const declare = (name: string) => db.query('insert into acta.definitions (namespace, name) values ($1, $2) on conflict do nothing', [ns, name]);
async function job(definition: string, status: string, agoMs: number): Promise<string> {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (namespace, definition, payload, status, run_at, finished_at)
     values ($1, $2, '{}', $3, now() - $4::bigint * interval '1 millisecond',
             case when $3 in ('succeeded', 'failed', 'cancelled') then now() - $4::bigint * interval '1 millisecond' end)
     returning id`,
    [ns, definition, status, agoMs],
  );
  return rows[0].id;
}

test('worker_dead: raised once while the dead worker\'s last heartbeat is within the window, resolved once after it; a later incident is raised again', async () => {
  const dead = await worker('dead', ['d'], 60_000);
  await worker('alive', ['d']);
  expect(changes(await evaluate())).toEqual([['raised', 'worker_dead', dead]]);
  expect(changes(await evaluate())).toEqual([]);
  const [open] = await evaluate();
  expect(open).toMatchObject({ rule: 'worker_dead', subject: dead, resolvedAt: null, detail: { hostname: 'host', pid: 1 } });
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 hour' where id = $1`, [dead]);
  expect(changes(await evaluate())).toEqual([['resolved', 'worker_dead', dead]]);
  expect(changes(await evaluate())).toEqual([]);
  expect((await evaluate())[0].resolvedAt).toBeInstanceOf(Date);
  await db.query(`update acta.workers set last_heartbeat_at = now() where id = $1`, [dead]);
  const again = await evaluate();
  expect(changes(again)).toEqual([['raised', 'worker_dead', dead]]);
  expect(again[0].raisedAt.getTime()).toBeGreaterThan(open.raisedAt.getTime());
});

test('no_live_worker: a declared definition with a due Ready row and no live worker running it; resolved when one starts; a row due later, or a stopped worker, changes nothing', async () => {
  await declare('orphan');
  await worker('dead', ['orphan'], 3_600_000);
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions, status) values ($1, $2, 'h', 1, '{orphan}', 'stopped')`, [randomUUID(), ns]);
  const later = await job('orphan', 'ready', -60_000);
  expect(changes(await evaluate())).toEqual([]);
  await db.query(`update acta.jobs set run_at = now() - interval '1 second' where id = $1`, [later]);
  expect(changes(await evaluate())).toEqual([['raised', 'no_live_worker', 'orphan']]);
  expect(changes(await evaluate())).toEqual([]);
  await worker('alive', ['other', 'orphan']);
  expect(changes(await evaluate())).toEqual([['resolved', 'no_live_worker', 'orphan']]);
  expect(changes(await evaluate())).toEqual([]);
});

test('oldest_ready: the oldest due Ready row of a definition waited past the threshold; resolved when it runs', async () => {
  await declare('slow');
  await worker('alive', ['slow']);
  await job('slow', 'ready', DEFAULT_READY_AGE_MS - 30_000);
  expect(changes(await evaluate())).toEqual([]);
  const old = await job('slow', 'ready', DEFAULT_READY_AGE_MS + 1_000);
  const raised = await evaluate();
  expect(changes(raised)).toEqual([['raised', 'oldest_ready', 'slow']]);
  expect((raised[0].detail as { ageMs: number }).ageMs).toBeGreaterThanOrEqual(DEFAULT_READY_AGE_MS + 1_000);
  expect(changes(await evaluate())).toEqual([]);
  await db.query(`update acta.jobs set status = 'executing' where id = $1`, [old]);
  expect(changes(await evaluate())).toEqual([['resolved', 'oldest_ready', 'slow']]);
  expect(changes(await evaluate())).toEqual([]);
});

test('oldest_ready and no_live_worker: a pause (of the definition, or of the whole namespace) silences them for the due jobs it holds, as acta namespaces shows them under OLDEST PAUSED; a resume raises them again', async () => {
  await declare('slow');
  await declare('orphan');
  await declare('other');
  await worker('alive', ['slow', 'other']);
  await job('slow', 'ready', DEFAULT_READY_AGE_MS + 60_000);
  await job('orphan', 'ready', 1_000); // no live worker declares it
  await db.query('insert into acta.pauses (namespace, definition) values ($1, $2), ($1, $3)', [ns, 'slow', 'orphan']);
  expect(changes(await evaluate())).toEqual([]);
  // Another definition of the namespace, not paused, is still seen.
  await job('other', 'ready', DEFAULT_READY_AGE_MS + 60_000);
  expect(changes(await evaluate())).toEqual([['raised', 'oldest_ready', 'other']]);
  // The definitions' resume: their due jobs wait for a worker again.
  await db.query('delete from acta.pauses where namespace = $1', [ns]);
  expect(changes(await evaluate())).toEqual([
    ['raised', 'no_live_worker', 'orphan'],
    ['raised', 'oldest_ready', 'slow'],
  ]);
  // The whole namespace paused (definition ''): every open one of those resolves.
  await db.query(`insert into acta.pauses (namespace, definition) values ($1, '')`, [ns]);
  expect(changes(await evaluate())).toEqual([
    ['resolved', 'no_live_worker', 'orphan'],
    ['resolved', 'oldest_ready', 'other'],
    ['resolved', 'oldest_ready', 'slow'],
  ]);
  // A pause of another namespace holds nothing here.
  await db.query('delete from acta.pauses where namespace = $1', [ns]);
  await db.query(`insert into acta.pauses (namespace, definition) values ($1, ''), ($1, 'slow')`, [`${ns}-other`]);
  try {
    expect(changes(await evaluate())).toEqual([
      ['raised', 'no_live_worker', 'orphan'],
      ['raised', 'oldest_ready', 'other'],
      ['raised', 'oldest_ready', 'slow'],
    ]);
  } finally {
    await db.query('delete from acta.pauses where namespace = $1', [`${ns}-other`]);
  }
});

test('failure_rate: of the jobs a definition ended in the window, at least the minimum and at least half Failed; resolved when they leave the window; too few jobs or a low rate raise nothing', async () => {
  for (let i = 0; i < 4; i++) await job('few', 'failed', 1_000); // 4 of 4 failed, under the minimum of 10
  for (let i = 0; i < 4; i++) await job('fine', 'failed', 1_000);
  for (let i = 0; i < 8; i++) await job('fine', 'succeeded', 1_000); // 4 of 12
  const flaky: string[] = [];
  for (let i = 0; i < 6; i++) flaky.push(await job('flaky', 'failed', 1_000));
  for (let i = 0; i < 4; i++) await job('flaky', 'succeeded', 1_000); // 6 of 10
  await job('flaky', 'failed', DEFAULT_FAILURE_WINDOW_MS + 60_000); // outside the window
  const raised = await evaluate();
  expect(changes(raised)).toEqual([['raised', 'failure_rate', 'flaky']]);
  expect(raised[0].detail).toEqual({ failed: 6, succeeded: 4, windowMs: DEFAULT_FAILURE_WINDOW_MS });
  expect(changes(await evaluate())).toEqual([]);
  await db.query(`update acta.jobs set finished_at = now() - interval '1 day' where id = any ($1::bigint[])`, [flaky]);
  expect(changes(await evaluate())).toEqual([['resolved', 'failure_rate', 'flaky']]);
  expect(changes(await evaluate())).toEqual([]);
});

test('schedule_late: a schedule whose armed fire is Ready and due past the bound is raised once and resolved once when the fire is claimed; a fire due within the bound, a paused schedule\'s, or one no schedule arms raise nothing', async () => {
  const schedule = async (name: string, dueAgoMs: number, paused = false) => {
    const fire = await job(name, 'ready', dueAgoMs);
    await db.query(`update acta.jobs set schedule = $2, scheduled_at = run_at where id = $1`, [fire, name]);
    await db.query(
      `insert into acta.schedules (namespace, name, definition, cron, source, paused, job_id, next_fire_at)
       select $1, $2, $2, '* * * * *', 'runtime', $3, j.id, j.run_at from acta.jobs j where j.id = $4`,
      [ns, name, paused, fire],
    );
    return fire;
  };
  const tick = await schedule('tick', DEFAULT_SCHEDULE_LATE_MS - 20_000);
  await schedule('held', DEFAULT_SCHEDULE_LATE_MS + 60_000, true);
  const stray = await job('stray', 'ready', DEFAULT_SCHEDULE_LATE_MS + 60_000);
  await db.query(`update acta.jobs set schedule = 'stray', scheduled_at = run_at where id = $1`, [stray]);
  expect(changes(await evaluate())).toEqual([]);
  await db.query(`update acta.jobs set run_at = run_at - interval '30 seconds' where id = $1`, [tick]);
  const raised = await evaluate();
  expect(changes(raised)).toEqual([['raised', 'schedule_late', 'tick']]);
  expect(raised[0].detail).toMatchObject({ definition: 'tick', lateMs: expect.any(Number) });
  expect((raised[0].detail as { lateMs: number }).lateMs).toBeGreaterThanOrEqual(DEFAULT_SCHEDULE_LATE_MS + 10_000);
  expect(changes(await evaluate())).toEqual([]);
  await db.query(`update acta.jobs set status = 'executing' where id = $1`, [tick]);
  expect(changes(await evaluate())).toEqual([['resolved', 'schedule_late', 'tick']]);
  expect(changes(await evaluate())).toEqual([]);
});

test('the onAlert job is enqueued exactly once per raise and once per resolve, in the evaluation\'s transaction, and concurrent evaluations raise once', async () => {
  const dead = await worker('dead', ['d'], 1_000);
  const results = await Promise.all(Array.from({ length: 5 }, () => evaluate('notify')));
  expect(results.flatMap(changes)).toEqual([['raised', 'worker_dead', dead]]);
  for (let i = 0; i < 3; i++) await evaluate('notify');
  const sent = async () =>
    (await db.query<{ payload: { rule: string; subject: string; change: string }; status: string }>(`select payload, status from acta.jobs where namespace = $1 and definition = 'notify' order by id`, [ns])).rows;
  // Its times as the log line writes them (the Date's toISOString), not PostgreSQL's text (docs/alerts.md).
  const raisedAt = results.flat().find((r) => r.change === 'raised')!.raisedAt.toISOString();
  expect(raisedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  expect(await sent()).toEqual([{ payload: expect.objectContaining({ rule: 'worker_dead', subject: dead, change: 'raised', raisedAt, resolvedAt: null }), status: 'ready' }]);
  await db.query(`update acta.workers set last_heartbeat_at = now() - interval '1 day' where id = $1`, [dead]);
  const resolvedAt = (await evaluate('notify')).find((r) => r.change === 'resolved')!.resolvedAt!.toISOString();
  for (let i = 0; i < 2; i++) await evaluate('notify');
  expect((await sent()).map((r) => r.payload)).toEqual([expect.objectContaining({ change: 'raised' }), expect.objectContaining({ change: 'resolved', raisedAt, resolvedAt })]);

  // A transaction that rolls back leaves neither the alert nor its job.
  const other = await worker('dead', ['d'], 1_000);
  await expect(
    db.transaction(async (tx) => {
      expect(changes(await evaluateAlerts(tx, { namespace: ns, thresholds: alertThresholds({}), onAlert: 'notify' }))).toEqual([['raised', 'worker_dead', other]]);
      throw new Error('rolled back');
    }),
  ).rejects.toThrow('rolled back');
  expect((await sent()).length).toBe(2);
  expect(changes(await evaluate('notify'))).toEqual([['raised', 'worker_dead', other]]);
});

test('the definition: thresholds from the payload (a bad one is a ConfigError), warn on raise and info on resolve, acta_alert 1 then 0 in every registry that reads the table', async () => {
  const dead = await worker('dead', ['d'], 120_000);
  const lines: { level: number; msg: string; rule?: string; subject?: string }[] = [];
  const raw: string[] = [];
  // As the worker's executor gives a system job: its logger already carries `component`.
  const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _enc, done) => (raw.push(String(chunk)), lines.push(JSON.parse(String(chunk))), done()) })).child({ component: 'executor' });
  const definition = alertsDefinition({ ledger: sqlLedger(db), namespace: ns });
  const ctx = { signal: new AbortController().signal, logger } as never;
  await expect(Promise.resolve().then(() => definition.handler({ failureRate: 2 }, ctx))).rejects.toThrow(ConfigError);
  await expect(Promise.resolve().then(() => definition.handler({ deadWindow: 1 } as never, ctx))).rejects.toThrow(ConfigError);
  expect(() => alertsDefinition({ ledger: sqlLedger(db), namespace: ns, onAlert: '' })).toThrow(ConfigError);
  const registries = [new Registry(), new Registry()];
  for (const r of registries) alertMetric(sqlLedger(db), ns, [r]);
  const metric = async (r: Registry) => (await r.metrics()).split('\n').filter((l) => l.startsWith('acta_alert{'));

  expect(await definition.handler({ deadWindowMs: 60_000 }, ctx)).toEqual({ open: 0, raised: 0, resolved: 0 });
  expect(await definition.handler(null, ctx)).toEqual({ open: 1, raised: 1, resolved: 0 });
  expect(await definition.handler(null, ctx)).toEqual({ open: 1, raised: 0, resolved: 0 });
  for (const r of registries) expect(await metric(r)).toEqual([`acta_alert{rule="worker_dead",subject="${dead}"} 1`]);
  expect(await definition.handler({ deadWindowMs: 60_000 }, ctx)).toEqual({ open: 0, raised: 0, resolved: 1 });
  for (const r of registries) expect(await metric(r)).toEqual([`acta_alert{rule="worker_dead",subject="${dead}"} 0`]);
  const alertLines = lines.filter((l) => l.msg.startsWith('alert '));
  expect(alertLines.map((l) => [l.level, l.msg, l.rule, l.subject])).toEqual([
    [40, 'alert raised', 'worker_dead', dead],
    [30, 'alert resolved', 'worker_dead', dead],
  ]);
  // One `component` per line: the pass is named in `pass` (docs/operating.md, "Logs").
  expect(raw.filter((l) => l.split('"component":').length > 2)).toEqual([]);
  expect(lines.filter((l) => l.msg.startsWith('alert ')).every((l) => (l as { pass?: string }).pass === 'alerts')).toBe(true);
  // Forgotten after keepResolvedMs: the series goes.
  expect(await definition.handler({ deadWindowMs: 60_000, keepResolvedMs: 0 }, ctx)).toEqual({ open: 0, raised: 0, resolved: 0 });
  expect(await metric(registries[0])).toEqual([]);
});

test('a worker whose onAlert names a definition no worker of the namespace declares says so at its start; one declared elsewhere, or its own, is quiet', async () => {
  const started = async (onAlert: string, own: string[] = ['d']) => {
    const lines: { msg: string; onAlert?: string }[] = [];
    const logger = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
    const w = createWorker({ db, namespace: ns, logger, listen: false, alerts: { onAlert }, definitions: own.map((name) => defineJob({ name, handler: () => undefined })) });
    await w.start();
    await w.stop();
    return lines.filter((l) => l.msg.startsWith('alerts.onAlert')).map((l) => l.onAlert);
  };
  expect(await started('notfiy')).toEqual(['notfiy']);
  expect(await started('notify', ['d', 'notify'])).toEqual([]);
  // Declared by the worker just stopped: another service's definition.
  expect(await started('notify')).toEqual([]);
});

test('an evaluation is never JIT-compiled: with sequential scans off, its read of acta.workers costs past jit_above_cost, and compiling it took about 1 s per fire', async () => {
  await worker('dead', ['d'], 1_000);
  const client = new Client({ connectionString: tdb.url, options: '-c jit=on -c client_min_messages=log' });
  const plans: string[] = [];
  client.on('notice', (n) => plans.push(String(n.message)));
  await client.connect();
  try {
    await client.query("load 'auto_explain'");
    await client.query('set auto_explain.log_min_duration = 0');
    await client.query('set auto_explain.log_nested_statements = on');
    await client.query('set auto_explain.log_settings = on'); // "Settings: jit = 'off'" when the function sets it
    const jitAboveCost = Number((await client.query<{ c: string }>(`select current_setting('jit_above_cost') as c`)).rows[0].c);
    const t = alertThresholds({});
    const { rows } = await client.query<{ rule: string }>('select * from acta.evaluate_alerts($1, $2, $3, $4, $5, $6, $7, $8, $9)', [ns, t.deadWindowMs, t.readyAgeMs, t.failureWindowMs, t.failureRate, t.failureMinJobs, t.keepResolvedMs, t.scheduleLateMs, null]);
    expect(rows.map((r) => r.rule)).toEqual(['worker_dead']);
    // The function's statements (their plans name acta's relations), each with its top cost.
    const inner = plans.filter((p) => /on (alerts|workers|jobs|definitions|schedules) /.test(p) && !p.includes('evaluate_alerts'));
    expect(inner.length).toBeGreaterThan(0);
    const costly = inner.filter((p) => Number(/cost=[\d.]+\.\.([\d.]+)/.exec(p)?.[1]) > jitAboveCost);
    // Before PostgreSQL 18 a disabled sequential scan adds 1e10 to its plan's cost, so the read of
    // acta.workers costs past jit_above_cost (18 counts disabled nodes apart, and its cost stays low).
    const version = Number((await client.query<{ v: string }>(`select current_setting('server_version_num') as v`)).rows[0].v);
    expect(costly.length > 0).toBe(version < 180_000);
    // A server built with LLVM compiles such a plan unless the function turns JIT off.
    expect(costly.filter((p) => p.includes('JIT:') || !/Settings:.*jit = 'off'/.test(p)).map((p) => p.split('\n')[0])).toEqual([]);
  } finally {
    await client.end();
  }
});
