// A deadline past Node's largest timer (2^31 - 1 ms) waits as long as the timer can, not 1 ms: a
// retention or outbox batch timeout near it plus the worker's own deadline (src/ledger.ts, `within`)
// failed every call at once as DbUnansweredError (src/db/pgDb.ts, onClientWithin).
import { withDeadline } from '../../src';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

test('a call under a deadline of 2^31 ms and more is answered', async () => {
  for (const ms of [2 ** 31 - 1, 2 ** 31 + 60_000, 2 ** 40]) {
    const timed = withDeadline(db, ms);
    // 20 ms: a timer fired after 1 ms would have failed it.
    await expect(timed.query('select pg_sleep(0.02)')).resolves.toMatchObject({ rows: [{ pg_sleep: '' }] });
    await expect(timed.transaction(async (tx) => (await tx.query('select pg_sleep(0.02), 7 as n')).rows[0])).resolves.toMatchObject({ n: 7 });
  }
});
