// Schedules at runtime on a real database (docs/schedules.md, "At runtime"): client.schedules
// add / list / pause / resume / trigger / remove, and each `acta schedule` subcommand through the
// built bin, with the typed errors on bad input (a bad cron, an unknown zone, a declared schedule
// changed or removed at runtime). Needs dist/ (npm run build).
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomUUID } from 'node:crypto';
import { ConfigError, createClient, defineJob } from '../../src';
import { declaredPolicy } from '../../src/definition';
import { sqlLedger } from '../../src/ledger';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase();
const ROOT = path.resolve(__dirname, '../..');
const BIN = path.join(ROOT, 'bin', 'acta.js');

function acta(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: tdb.url, ACTA_LOG_LEVEL: 'warn' }, timeout: 30_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

/** A worker of `namespace` declaring `report` with a schedule named 'nightly' (the schedule armed). */
async function declareNightly(namespace: string) {
  const report = defineJob({ name: 'report', handler: () => undefined, schedule: { name: 'nightly', cron: '0 2 * * *', timeZone: 'Europe/Berlin' } });
  const ledger = sqlLedger(db);
  await ledger.registerWorker({ workerId: randomUUID(), namespace, hostname: 'h', pid: 1, definitions: ['report'], maxAttempts: [null], leaseMs: 60_000, build: 'b1', policies: { report: declaredPolicy(report) } });
  await ledger.armSchedules!(namespace);
}

const fireRows = async (namespace: string, name: string) =>
  (await db.query<{ id: string; status: string; scheduled_at: Date }>('select id::text, status, scheduled_at from acta.jobs where namespace = $1 and schedule = $2 order by id', [namespace, name])).rows;

describe('client.schedules', () => {
  test('add arms the next instant at once; the same spec again is "same", another "changed" (the unstarted fire re-armed); list shows next fire, last fire, last outcome', async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const client = createClient({ db, namespace: ns, definitions: [defineJob({ name: 'report', handler: () => undefined })] });
    expect(await client.schedules.add('report', { name: 'hourly', cron: '0 * * * *', payload: { k: 1 } })).toBe('added');
    const [added] = await client.schedules.list();
    expect(added).toMatchObject({ name: 'hourly', definition: 'report', cron: '0 * * * *', timeZone: 'UTC', payload: { k: 1 }, catchUp: 'latest', source: 'runtime', paused: false, lastFireAt: null, lastOutcome: null });
    expect(added.nextFireAt!.getTime() % 3_600_000).toBe(0);
    expect(added.nextFireAt!.getTime()).toBeGreaterThan(Date.now() - 5_000);
    const job = await client.getJob(added.jobId!);
    expect(job).toMatchObject({ status: 'ready', schedule: 'hourly', scheduledAt: added.nextFireAt, payload: { k: 1 } });

    expect(await client.schedules.add('report', { name: 'hourly', cron: '0 * * * *', payload: { k: 1 } })).toBe('same');
    expect((await client.schedules.list('hourly'))[0].jobId).toBe(added.jobId);
    expect(await client.schedules.add('report', { name: 'hourly', cron: '30 * * * *', payload: { k: 2 } })).toBe('changed');
    const [changed] = await client.schedules.list('hourly');
    expect(changed.nextFireAt!.getUTCMinutes()).toBe(30);
    expect(changed.jobId).not.toBe(added.jobId);
    expect(await client.getJob(added.jobId!)).toBeNull();
    expect((await fireRows(ns, 'hourly')).map((r) => r.id)).toEqual([changed.jobId]);
    expect(await client.schedules.list('nope')).toEqual([]);
  });

  test('pause deletes the unstarted fire and arms nothing; resume arms the next instant after now; trigger fires now besides the schedule; remove drops it and its fire', async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const client = createClient({ db, namespace: ns, force: true });
    expect(await client.schedules.add('report', { name: 'm', cron: '* * * * *', priority: 3 })).toBe('added');
    const [prioritised] = await client.schedules.list('m');
    expect(prioritised).toMatchObject({ priority: 3 });
    expect(await client.getJob(prioritised.jobId!)).toMatchObject({ priority: 3 }); // each fire at the schedule's priority
    expect(await client.schedules.add('report', { name: 'm', cron: '* * * * *', priority: 3 })).toBe('same');
    expect(await client.schedules.add('report', { name: 'm', cron: '* * * * *' })).toBe('changed');
    expect(await client.getJob(prioritised.jobId!)).toBeNull(); // a change deletes the unstarted fire
    await sqlLedger(db).armSchedules!(ns);
    const [armed] = await client.schedules.list('m');
    expect(await client.getJob(armed.jobId!)).toMatchObject({ priority: 0 });
    expect(await client.schedules.pause('m')).toBe(true);
    expect(await client.schedules.list('m')).toMatchObject([{ paused: true, jobId: null, nextFireAt: null }]);
    expect(await fireRows(ns, 'm')).toEqual([]);
    expect(await sqlLedger(db).armSchedules!(ns)).toBe(0);
    expect(await client.getJob(armed.jobId!)).toBeNull();

    const before = Date.now();
    expect(await client.schedules.resume('m')).toBe(true);
    const [resumed] = await client.schedules.list('m');
    expect(resumed).toMatchObject({ paused: false });
    expect(resumed.nextFireAt!.getTime()).toBeGreaterThan(before - 1_000);

    const id = await client.schedules.trigger('m');
    expect(id).not.toBeNull();
    const fired = await client.getJob(id!);
    expect(fired).toMatchObject({ status: 'ready', schedule: 'm', priority: 0 });
    expect(Math.abs(fired!.scheduledAt!.getTime() - Date.now())).toBeLessThan(10_000);
    expect((await client.schedules.list('m'))[0].jobId).toBe(resumed.jobId); // the trigger arms nothing

    expect(await client.schedules.remove('m')).toBe(true);
    expect(await client.schedules.list()).toEqual([]);
    expect((await fireRows(ns, 'm')).map((r) => r.id)).toEqual([id]); // the triggered fire stays
    for (const verb of ['pause', 'resume', 'remove'] as const) expect(await client.schedules[verb]('m')).toBe(false);
    expect(await client.schedules.trigger('m')).toBeNull();
  });

  // Was: the fire's new end left lastOutcome 'failed' (only the armed fire's end was recorded).
  test('last outcome follows the last fire: a failed fire retried by hand (acta jobs retry) while the schedule is paused lists its new outcome', async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const report = defineJob({ name: 'report', handler: () => undefined });
    const client = createClient({ db, namespace: ns, definitions: [report] });
    const ledger = sqlLedger(db);
    const workerId = randomUUID();
    await ledger.registerWorker({ workerId, namespace: ns, hostname: 'h', pid: 1, definitions: ['report'], maxAttempts: [1], leaseMs: 60_000, build: 'b1', policies: { report: declaredPolicy(report) } });
    expect(await client.schedules.add('report', { name: 'hourly', cron: '0 * * * *' })).toBe('added');
    const [armed] = await client.schedules.list('hourly');
    await db.query("update acta.jobs set run_at = now() - interval '1 second' where id = $1", [armed.jobId]);
    const claim = async () => (await ledger.claimJobs({ namespace: ns, workerId, definitions: ['report'], limit: 5, leaseMs: 60_000 })).rows[0];
    const first = await claim();
    expect(first.id).toBe(armed.jobId);
    const error = JSON.stringify({ name: 'Error', message: 'x' });
    expect((await ledger.completeExecutions(workerId, [{ id: first.id, execution: first.execution, outcome: 'failed_final', result: null, error, retryDelayMs: 0, nextFireAt: null }]))[0].status).toBe('failed');
    expect(await client.schedules.pause('hourly')).toBe(true);
    expect(await client.schedules.list('hourly')).toMatchObject([{ paused: true, jobId: null, lastJobId: first.id, lastOutcome: 'failed' }]);

    expect(await client.retryJobs({ ids: [first.id] })).toEqual([first.id]);
    const again = await claim();
    expect(again.id).toBe(first.id);
    expect(again.schedule!.armed).toBeFalsy(); // not the schedule's armed fire: it arms nothing
    expect((await ledger.completeExecutions(workerId, [{ id: again.id, execution: again.execution, outcome: 'succeeded', result: 'null', error: null, retryDelayMs: 0, nextFireAt: null }]))[0].status).toBe('succeeded');
    expect(await client.schedules.list('hourly')).toMatchObject([{ paused: true, jobId: null, nextFireAt: null, lastJobId: first.id, lastOutcome: 'succeeded' }]);
  });

  // Was: stored and listed as typed ('europe/berlin'), and the same zone spelled another way was a change.
  test('a time zone typed in another case is stored and listed by its canonical IANA name; declared ones too', async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const client = createClient({ db, namespace: ns, force: true });
    expect(await client.schedules.add('report', { name: 'b', cron: '0 2 * * *', timeZone: 'europe/berlin' })).toBe('added');
    expect(await client.schedules.list('b')).toMatchObject([{ timeZone: 'Europe/Berlin' }]);
    expect(await client.schedules.add('report', { name: 'b', cron: '0 2 * * *', timeZone: 'Europe/Berlin' })).toBe('same');
    expect(await client.schedules.add('report', { name: 'u', cron: '0 2 * * *', timeZone: 'utc' })).toBe('added');
    expect(await client.schedules.list('u')).toMatchObject([{ timeZone: 'UTC' }]);
    const declared = defineJob({ name: 'report', handler: () => undefined, schedule: { cron: '0 2 * * *', timeZone: 'AMERICA/NEW_YORK' } });
    expect(declaredPolicy(declared).schedules).toMatchObject([{ timeZone: 'America/New_York' }]);
  });

  test("a zone stored under an older ICU's name (Asia/Kolkata against Asia/Calcutta) is the same zone: the spec again is \"same\", its fire and version kept", async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const client = createClient({ db, namespace: ns, force: true });
    expect(await client.schedules.add('report', { name: 'k', cron: '30 3 * * *', timeZone: 'Asia/Kolkata' })).toBe('added');
    // The row as a Node whose ICU gives the zone its other name wrote it.
    const [{ time_zone: ours }] = (await db.query<{ time_zone: string }>('select time_zone from acta.schedules where namespace = $1 and name = $2', [ns, 'k'])).rows;
    const theirs = ours === 'Asia/Calcutta' ? 'Asia/Kolkata' : 'Asia/Calcutta';
    await db.query('update acta.schedules set time_zone = $3 where namespace = $1 and name = $2', [ns, 'k', theirs]);
    const row = async () => (await db.query<{ version: number; job_id: string }>('select version, job_id::text from acta.schedules where namespace = $1 and name = $2', [ns, 'k'])).rows[0];
    const before = await row();
    expect(await client.schedules.add('report', { name: 'k', cron: '30 3 * * *', timeZone: 'Asia/Kolkata' })).toBe('same');
    expect(await row()).toEqual(before);
    expect((await fireRows(ns, 'k')).map((r) => r.id)).toEqual([before.job_id]);
    expect(await client.schedules.list('k')).toMatchObject([{ timeZone: theirs }]);
    // Another zone is still a change.
    expect(await client.schedules.add('report', { name: 'k', cron: '30 3 * * *', timeZone: 'Asia/Dhaka' })).toBe('changed');
  });

  test('bad input is a ConfigError and changes nothing: a bad cron, an unknown zone, a bad catch-up, a declared schedule changed or removed', async () => {
    const ns = `rt-${randomUUID().slice(0, 8)}`;
    const client = createClient({ db, namespace: ns });
    await declareNightly(ns);
    const before = await client.schedules.list();
    expect(before).toMatchObject([{ name: 'nightly', source: 'declared', timeZone: 'Europe/Berlin' }]);
    await expect(client.schedules.add('report', { name: 'x', cron: '61 * * * *' })).rejects.toThrow(ConfigError);
    await expect(client.schedules.add('report', { name: 'x', cron: '* * *' })).rejects.toThrow(/must have 5 fields/);
    await expect(client.schedules.add('report', { name: 'x', cron: '0 2 * * *', timeZone: 'Mars/Olympus' })).rejects.toThrow(/timeZone "Mars\/Olympus"/);
    await expect(client.schedules.add('report', { name: 'x', cron: '0 2 * * *', catchUp: 'some' as never })).rejects.toThrow(ConfigError);
    await expect(client.schedules.add('report', { name: 'x', cron: '0 2 * * *', priority: 1.5 })).rejects.toThrow(/priority of schedules.add must be an integer/);
    await expect(client.schedules.add('report', { name: 'x', cron: '0 2 * * *', priority: 2 ** 31 })).rejects.toThrow(ConfigError);
    await expect(client.schedules.add('report', { name: 'nightly', cron: '0 3 * * *' })).rejects.toThrow(/declared in code/);
    await expect(client.schedules.remove('nightly')).rejects.toThrow(/declared in code/);
    // Fires that would never run: a definition no worker of the namespace declared (unless forced),
    // a cron with no instant to come; and a name past the limit.
    await expect(client.schedules.add('no-such', { cron: '0 2 * * *' })).rejects.toThrow(
      'schedules.add: no worker of namespace "' + ns + '" has declared definition "no-such", so its fires would never run (declared there: report).',
    );
    await expect(client.schedules.add('report', { name: 'x', cron: '0 0 30 2 *' })).rejects.toThrow(/cron "0 0 30 2 \*" in UTC has no instant from now on/);
    await expect(client.schedules.add('r'.repeat(256), { name: 'x', cron: '0 2 * * *' })).rejects.toThrow(/at most 255 bytes/);
    await expect(client.schedules.add('report', { name: 'x', cron: '0 2 * * *' }, { forse: true } as never)).rejects.toThrow(/unknown schedules.add option "forse"/);
    // The names of acta's system schedules: a worker option declares them, and its schedule would replace this one.
    await expect(client.schedules.add('report', { name: 'sys.retention', cron: '0 2 * * *' })).rejects.toThrow(/schedule names beginning "sys\." are acta's system schedules/);
    expect(await client.schedules.list()).toEqual(before);
    // A declared schedule can be paused, resumed and triggered.
    expect(await client.schedules.pause('nightly')).toBe(true);
    expect(await client.schedules.resume('nightly')).toBe(true);
    expect(await client.schedules.trigger('nightly')).not.toBeNull();
    // Forced, the schedule of a definition no worker declared yet is added (its worker starts later).
    expect(await client.schedules.add('later', { cron: '0 2 * * *' }, { force: true })).toBe('added');
  });
});

describe('acta schedule', () => {
  beforeAll(() => {
    if (!fs.existsSync(path.join(ROOT, 'dist', 'src', 'ops', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build`');
  });

  test('list: a schedule this Node cannot parse (a zone its ICU lacks) is said on stderr, its line unchanged', async () => {
    const ns = `cli-${randomUUID().slice(0, 8)}`;
    await db.query(`insert into acta.schedules (namespace, name, definition, cron, time_zone, source) values ($1, 'mars', 'report', '0 2 * * *', 'Mars/Olympus_Mons', 'runtime')`, [ns]);
    const list = await acta(['schedule', 'list', '--namespace', ns]);
    expect(list).toMatchObject({ code: 0, stdout: 'mars\treport\t"0 2 * * *"\tMars/Olympus_Mons\truntime\tactive\tnext=-\tlast=-\toutcome=-\n' });
    expect(list.stderr).toMatch(/^note: schedule "mars" \(cron "0 2 \* \* \*" in Mars\/Olympus_Mons\) cannot be parsed by this Node: .+; a worker on such a Node leaves it unarmed and says so in a warn line\n$/);
  });

  test('add, list, pause, resume, trigger, remove: each does what client.schedules does; an unknown name exits 1', async () => {
    const ns = `cli-${randomUUID().slice(0, 8)}`;
    const args = ['schedule', 'add', 'report', '0 9 * * 1-5', '--name', 'weekday', '--time-zone', 'America/New_York', '--payload', '{"k":1}', '--catch-up', 'all', '--catch-up-window-ms', '3600000', '--namespace', ns];
    // No worker of the namespace declared `report` yet: refused, unless --force.
    expect(await acta(args)).toMatchObject({ code: 1, stdout: '', stderr: expect.stringContaining('has declared definition "report", so its fires would never run') });
    expect(await acta([...args, '--force'])).toMatchObject({ code: 0, stdout: 'added\n' });
    const client = createClient({ db, namespace: ns });
    const [s] = await client.schedules.list('weekday');
    expect(s).toMatchObject({ definition: 'report', cron: '0 9 * * 1-5', timeZone: 'America/New_York', payload: { k: 1 }, catchUp: 'all', catchUpWindowMs: 3_600_000, source: 'runtime' });

    const list = await acta(['schedule', 'list', '--namespace', ns]);
    expect(list.code).toBe(0);
    expect(list.stdout.trim().split('\t')).toEqual(['weekday', 'report', '"0 9 * * 1-5"', 'America/New_York', 'runtime', 'active', `next=${s.nextFireAt!.toISOString()}`, 'last=-', 'outcome=-']);
    const json = await acta(['schedule', 'list', '--json', '--namespace', ns]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(JSON.stringify(s)));

    expect(await acta(['schedule', 'resume', 'weekday', '--namespace', ns])).toMatchObject({ code: 0, stdout: 'was not paused: weekday\n' }); // as `acta resume` says it
    expect(await acta(['schedule', 'pause', 'weekday', '--namespace', ns])).toMatchObject({ code: 0, stdout: 'paused: weekday\n' });
    expect(await client.schedules.list('weekday')).toMatchObject([{ paused: true, nextFireAt: null }]);
    expect(await acta(['schedule', 'pause', 'weekday', '--namespace', ns])).toMatchObject({ code: 0, stdout: 'already paused: weekday\n' }); // as `acta pause` says it
    expect((await acta(['schedule', 'list', 'weekday', '--namespace', ns])).stdout).toContain('\tpaused\tnext=-\t');
    expect(await acta(['schedule', 'resume', 'weekday', '--namespace', ns])).toMatchObject({ code: 0, stdout: 'resumed: weekday\n' });
    expect((await client.schedules.list('weekday'))[0].nextFireAt).not.toBeNull();

    const trigger = await acta(['schedule', 'trigger', 'weekday', '--namespace', ns]);
    expect(trigger.code).toBe(0);
    expect(await client.getJob(trigger.stdout.trim())).toMatchObject({ schedule: 'weekday', payload: { k: 1 } });

    expect(await acta(['schedule', 'remove', 'weekday', '--namespace', ns])).toMatchObject({ code: 0, stdout: 'removed: weekday\n' });
    expect(await client.schedules.list()).toEqual([]);
    for (const verb of ['pause', 'resume', 'trigger', 'remove']) {
      const r = await acta(['schedule', verb, 'weekday', '--namespace', ns]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('no schedule "weekday"');
    }
  });

  test('bad input exits 1 with a plain message and writes nothing: a bad cron, an unknown zone, bad JSON, a bad catch-up, a declared schedule', async () => {
    const ns = `cli-${randomUUID().slice(0, 8)}`;
    await declareNightly(ns);
    const cases: [string[], RegExp][] = [
      [['schedule', 'add', 'report', '99 * * * *', '--name', 'x'], /cron "99 \* \* \* \*" is not valid/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--time-zone', 'Mars/Olympus'], /timeZone "Mars\/Olympus"/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--payload', '{nope'], /--payload/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--catch-up', 'some'], /catchUp/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--catch-up', 'all', '--catch-up-window-ms', 'soon'], /--catch-up-window-ms <ms>' argument 'soon' is invalid/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--catch-up-window-ms', '10'], /--catch-up-window-ms goes with --catch-up all/],
      [['schedule', 'add', 'report', '0 2 * * *', '--name', 'x', '--priority', 'high'], /priority .* must be an integer/],
      [['schedule', 'add', 'report', '0 3 * * *', '--name', 'nightly'], /declared in code/],
      [['schedule', 'remove', 'nightly'], /declared in code/],
    ];
    for (const [args, message] of cases) {
      const r = await acta([...args, '--namespace', ns]);
      expect({ args, code: r.code }).toEqual({ args, code: 1 });
      expect(r.stderr).toMatch(message);
      expect(r.stderr).not.toContain('ACTA_DEBUG');
    }
    expect((await createClient({ db, namespace: ns }).schedules.list()).map((s) => [s.name, s.cron])).toEqual([['nightly', '0 2 * * *']]);
  });
});

it("client.schedules.add takes the definition itself and computes its fires' keys; by name, a definition stored with a key policy needs the keys in the spec", async () => {
  const ns = `rk-${randomUUID()}`;
  const limited = defineJob({ name: 'limited', concurrency: { key: (p: { account: string }) => p.account, limit: 1 }, handler: () => undefined });
  const ledger = sqlLedger(db);
  await ledger.registerWorker({ workerId: randomUUID(), namespace: ns, hostname: 'h', pid: 1, definitions: ['limited'], maxAttempts: [null], leaseMs: 60_000, build: 'b1', policies: { limited: declaredPolicy(limited) } });
  const client = createClient({ db, namespace: ns });
  expect(await client.schedules.add(limited, { name: 'by-def', cron: '0 3 * * *', payload: { account: 'a1' } })).toBe('added');
  await expect(client.schedules.add('limited', { name: 'by-name', cron: '0 3 * * *', payload: { account: 'a2' } })).rejects.toThrow(/concurrencyKey/);
  // The command says it with its flag.
  expect(await acta(['schedule', 'add', 'limited', '0 3 * * *', '--name', 'by-cli', '--namespace', ns])).toMatchObject({
    code: 1,
    stderr: expect.stringContaining('definition "limited" admits its jobs by concurrencyKey: give --concurrency-key'),
  });
  expect(await acta(['schedule', 'add', 'limited', '0 3 * * *', '--name', 'by-cli', '--concurrency-key', 'a', '--rate-key', 'r', '--namespace', ns])).toMatchObject({
    code: 1,
    stderr: expect.stringContaining('definition "limited" declares no policy for --rate-key: it would limit nothing of its own; leave it out'),
  });
  expect(await client.schedules.add('limited', { name: 'by-name', cron: '0 3 * * *', payload: { account: 'a2' }, concurrencyKey: 'a2' })).toBe('added');
  const listed = await client.schedules.list();
  expect(listed.map((s) => [s.name, s.concurrencyKey])).toEqual([['by-def', 'a1'], ['by-name', 'a2']]);
  // The armed fires carry them, and so does a trigger's.
  const triggered = await client.schedules.trigger('by-def');
  const { rows } = await db.query<{ schedule: string; concurrency_key: string }>('select schedule, concurrency_key from acta.jobs where namespace = $1 order by id', [ns]);
  expect(rows).toEqual([
    { schedule: 'by-def', concurrency_key: 'a1' },
    { schedule: 'by-name', concurrency_key: 'a2' },
    { schedule: 'by-def', concurrency_key: 'a1' },
  ]);
  expect(triggered).not.toBeNull();
  // A cron with no instant from now on is refused where it is written, in code too.
  expect(() => defineJob({ name: 'never', handler: () => undefined, schedule: { cron: '0 0 30 2 *' } })).toThrow(/would never fire/);
  await expect(client.schedules.add(limited, { cron: '0 0 30 2 *' })).rejects.toBeInstanceOf(ConfigError);
});
