// acta.claim_jobs' resumed scan (claim_jobs.sql, "Resumed scan"; docs/decisions/2026-12-05-held-snapshot.md):
// after a slow pick from jobs_due_idx's start, a session's next picks of an ungated plain definition
// start past the last row it claimed, for a bounded time; a row placed behind that position waits at
// most that long, and an idle answer says when to claim again. The slowness a held snapshot causes
// is not reproducible on demand, so these tests lower the trigger (acta.claim_resume_after_ms) on
// their session; the last one holds that a normal pick at the default trigger never resumes.
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { useTestDatabase } from '../helpers/db';

const { db, tdb } = useTestDatabase();
const worker = randomUUID();
const clients: Client[] = [];

async function session(settings: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ connectionString: tdb.url });
  client.on('error', () => undefined);
  await client.connect();
  clients.push(client);
  for (const [k, v] of Object.entries(settings)) await client.query('select set_config($1, $2, false)', [k, v]);
  await claim(client, 'none', 1); // a session's first claim (its pick also planned) never resumes
  return client;
}

afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
});

beforeAll(async () => {
  await db.query(`insert into acta.workers (id, namespace, hostname, pid, definitions) values ($1, 'rs', 'test', 1, '{plain,keyed}')`, [worker]);
  await db.query(`insert into acta.definitions (namespace, name, concurrency_limit) values ('rs', 'keyed', 100), ('rs', 'plain', null)`);
});
beforeEach(() => db.query('truncate acta.jobs, acta.executions'));

/** `n` Ready rows of `definition`, due in id order (a second apart, all in the past); their ids. */
async function backlog(definition: string, n: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `insert into acta.jobs (namespace, definition, payload, run_at)
     select 'rs', $1, '{}', now() - interval '1 day' + g * interval '1 second' from generate_series(1, $2) g returning id::text as id`,
    [definition, n],
  );
  return rows.map((r) => r.id).sort((a, b) => Number(a) - Number(b));
}

/** One claim on `client`: the ids claimed in order, and the idle answer's next_due_in_ms. */
async function claim(client: Client, definition: string, limit: number): Promise<{ ids: string[]; nextDueInMs: number | null }> {
  const { rows } = await client.query<{ job_id: string | null; next_due_in_ms: number | null }>(
    `select job_id::text, next_due_in_ms from acta.claim_jobs('rs', $1, $2, $3, 60000)`,
    [worker, [definition], limit],
  );
  return { ids: rows.filter((r) => r.job_id !== null).map((r) => r.job_id as string), nextDueInMs: rows.find((r) => r.job_id === null)?.next_due_in_ms ?? null };
}

/** The session's positions in namespace 'rs', by definition: [until, run_at, id]. */
const positions = async (client: Client) => {
  const { rows } = await client.query<{ v: string | null }>(`select current_setting('acta.claim_resume', true) as v`);
  return ((rows[0].v ? JSON.parse(rows[0].v) : {}) as Record<string, Record<string, [string, string, number]>>).rs ?? {};
};

test('after a slow pick the session resumes past its last claimed row; a row placed behind is claimed once the hold ends', async () => {
  const ids = await backlog('plain', 12);
  const s = await session({ 'acta.claim_resume_after_ms': '-1000', 'acta.claim_resume_ms': '400' });
  expect((await claim(s, 'plain', 4)).ids).toEqual(ids.slice(0, 4));
  expect(Object.keys(await positions(s))).toEqual(['plain']);
  // A row due before all of them (a past runAt; or a transaction that began earlier, committing now).
  const [behind] = (await db.query<{ id: string }>(`insert into acta.jobs (namespace, definition, payload, run_at) values ('rs', 'plain', '{}', now() - interval '2 days') returning id::text as id`)).rows.map((r) => r.id);
  // Resumed: past the position, so the row behind waits.
  expect((await claim(s, 'plain', 4)).ids).toEqual(ids.slice(4, 8));
  // Another session, with no position, claims in due order from the start.
  const other = await session();
  expect((await claim(other, 'plain', 1)).ids).toEqual([behind]);
  await db.query(`update acta.jobs set status = 'ready', execution = 0, lease_holder = null, lease_expires_at = null where id = $1`, [behind]);
  // Once the hold has ended (max(400 ms, 20 x the slow pick): read from the position, on the
  // database's clock) the next pick starts from the index's start again: the row behind first.
  const [until] = (await positions(s)).plain;
  const { rows } = await db.query<{ ms: number }>(`select extract(epoch from $1::timestamptz - clock_timestamp()) * 1000 as ms`, [until]);
  expect(Number(rows[0].ms)).toBeLessThanOrEqual(10_000); // the hold's cap
  await new Promise((r) => setTimeout(r, Math.max(0, Number(rows[0].ms)) + 50));
  expect((await claim(s, 'plain', 2)).ids).toEqual([behind, ids[8]]);
});

test('an idle answer while resumed is due by the hold\'s end, so a row behind is not left until the next wakeup', async () => {
  const ids = await backlog('plain', 3);
  const s = await session({ 'acta.claim_resume_after_ms': '-1000', 'acta.claim_resume_ms': '30000' });
  expect((await claim(s, 'plain', 3)).ids).toEqual(ids);
  await db.query(`insert into acta.jobs (namespace, definition, payload, run_at) values ('rs', 'plain', '{}', now() - interval '2 days')`);
  const idle = await claim(s, 'plain', 3);
  expect(idle.ids).toEqual([]);
  expect(idle.nextDueInMs).not.toBeNull();
  expect(idle.nextDueInMs!).toBeGreaterThan(0);
  expect(idle.nextDueInMs!).toBeLessThanOrEqual(10_000); // the hold's cap, though 30 s were asked
  // Without a position nothing is due later: no time at all (a wakeup or the safety poll).
  await db.query(`delete from acta.jobs where status = 'ready'`);
  expect((await claim(await session(), 'plain', 3)).nextDueInMs).toBeNull();
});

test('a gated definition (a concurrency limit) never resumes: its parked rows come back behind any position', async () => {
  const ids = await backlog('keyed', 6);
  await db.query(`update acta.jobs set concurrency_key = 'k' where definition = 'keyed'`);
  const s = await session({ 'acta.claim_resume_after_ms': '-1000' });
  expect((await claim(s, 'keyed', 3)).ids).toEqual(ids.slice(0, 3));
  expect(await positions(s)).toEqual({});
});

test('at the default trigger a pick over a short backlog sets no position', async () => {
  const ids = await backlog('plain', 20);
  const s = await session({ 'acta.claim_resume_after_ms': '' }); // the default (test databases set Infinity: test/helpers/db.ts)
  expect((await claim(s, 'plain', 8)).ids).toEqual(ids.slice(0, 8));
  expect((await claim(s, 'plain', 8)).ids).toEqual(ids.slice(8, 16));
  expect(await positions(s)).toEqual({});
});

test("no position where rows could come back behind it: a session's first claim, a keyed row met, a walk by priority", async () => {
  const ids = await backlog('plain', 12);
  // A session's first claim is also its pick's planning: never a trigger.
  const fresh = new Client({ connectionString: tdb.url });
  fresh.on('error', () => undefined);
  clients.push(fresh);
  await fresh.connect();
  await fresh.query(`select set_config('acta.claim_resume_after_ms', '-1000', false)`);
  expect((await claim(fresh, 'plain', 2)).ids).toEqual(ids.slice(0, 2));
  expect(await positions(fresh)).toEqual({});
  expect((await claim(fresh, 'plain', 2)).ids).toEqual(ids.slice(2, 4));
  expect(Object.keys(await positions(fresh))).toEqual(['plain']);
  // A keyed row (a lane given as an option) among the candidates: the positions go.
  await db.query(`update acta.jobs set lane = 'l' where id = $1`, [ids[4]]);
  expect((await claim(fresh, 'plain', 2)).ids).toEqual(ids.slice(4, 6));
  expect(await positions(fresh)).toEqual({});
  // Mixed priorities (a higher one due): the claim walks jobs_claim_idx and writes no position.
  await db.query(`update acta.jobs set priority = 5 where id = $1`, [ids[11]]);
  const s = await session({ 'acta.claim_resume_after_ms': '-1000' });
  expect((await claim(s, 'plain', 2)).ids).toEqual([ids[11], ids[6]]);
  expect(await positions(s)).toEqual({});
});
