// Every typed wrapper of src/db/ (src/db/call.ts, SIGNATURES) held against the live catalog
// (docs/DESIGN.md, "Storage": each stage's database work is one SQL function): a signature drift
// between TS and SQL fails here, not in production.
import { SIGNATURES } from '../../src/db/call';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

test.each(Object.entries(SIGNATURES))('acta.%s has the identity arguments its wrapper sends', async (name, signature) => {
  const { rows } = await db.query<{ args: string }>(
    `select pg_get_function_identity_arguments(p.oid) as args
       from pg_proc p join pg_namespace n on n.oid = p.pronamespace
      where n.nspname = 'acta' and p.proname = $1`,
    [name],
  );
  expect(rows).toEqual([{ args: signature }]); // exactly one overload, with these arguments
});

test('no acta function exists that SIGNATURES does not list', async () => {
  const { rows } = await db.query<{ proname: string }>(
    `select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'acta' order by 1`,
  );
  expect(rows.map((r) => r.proname)).toEqual(Object.keys(SIGNATURES).sort());
});

// Before PostgreSQL 18 an SQL-language function keeps no plan across statements: called from
// PL/pgSQL once per statement (a simple expression's state lasts one transaction), its query was
// parsed and planned at every call. acta.wal_message_allowed was one, asked twice by every
// enqueue on a server: 0.41 ms of the 1.65 before the enqueue's NOTIFY left
// (docs/decisions/2026-12-03-wal-message-allowed-in-plpgsql.md). PL/pgSQL plans its statements once per session.
test('the functions an enqueue calls from PL/pgSQL are PL/pgSQL, so their queries are planned once per session', async () => {
  const { rows } = await db.query<{ proname: string; lanname: string }>(
    `select p.proname, l.lanname from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
      where n.nspname = 'acta' and p.proname in ('enqueue_jobs', 'enqueue_jobs_wake_early', 'wal_message_allowed') order by 1`,
  );
  expect(rows).toEqual([
    { proname: 'enqueue_jobs', lanname: 'plpgsql' },
    { proname: 'enqueue_jobs_wake_early', lanname: 'plpgsql' },
    { proname: 'wal_message_allowed', lanname: 'plpgsql' },
  ]);
});

test('acta.wal_message_allowed answers as the catalog does: 3 arguments on every server, 4 only from PostgreSQL 17', async () => {
  const { rows } = await db.query<{ three: boolean; four: boolean; has_four: boolean }>(
    `select acta.wal_message_allowed(3) as three, acta.wal_message_allowed(4) as four,
            exists (select 1 from pg_proc where proname = 'pg_logical_emit_message' and pronargs = 4) as has_four`,
  );
  expect(rows).toEqual([{ three: true, four: rows[0].has_four, has_four: rows[0].has_four }]);
  const { rows: version } = await db.query<{ v: number }>(`select current_setting('server_version_num')::integer as v`);
  expect(rows[0].four).toBe(version[0].v >= 170000);
});
