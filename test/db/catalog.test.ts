// Every typed wrapper of src/db/functions.ts held against the live catalog (STYLE.md, SQL): a
// signature drift between TS and SQL fails here, not in production.
import { SIGNATURES } from '../../src/db/functions';
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
