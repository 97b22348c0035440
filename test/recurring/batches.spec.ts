// A recurring pass's batches (src/recurring/batches.ts, runBatches): a batch that times out, or is
// too large for one statement, is halved down to 1 row; any other error ends the pass. With a carry
// (sys.outbox, sys.retention), the next pass starts at the size the last one ended with.
import { type BatchCarry, runBatches } from '../../src/recurring/batches';
import { retentionDefinition } from '../../src/recurring/retention';

const sqlError = (code: string) => Object.assign(new Error(code), { code });
const settings = { batchSize: 64, batchTimeoutMs: 1_000, passBudgetMs: 60_000 };

test.each([['57014'], ['54000']])('a batch failing with %s is halved until it fits; the pass then takes the rest', async (code) => {
  const sizes: number[] = [];
  let left = 20;
  const result = await runBatches(
    async (limit) => {
      sizes.push(limit);
      if (limit > 8) throw sqlError(code);
      const n = Math.min(limit, left);
      left -= n;
      return n;
    },
    settings,
    { what: 'test' },
  );
  expect(sizes).toEqual([64, 32, 16, 8, 8, 8]);
  expect(result).toMatchObject({ taken: 20, timeouts: 3, batchSize: 8, complete: true });
});

test('any other error ends the pass', async () => {
  await expect(runBatches(async () => Promise.reject(sqlError('23505')), settings, { what: 'test' })).rejects.toMatchObject({ code: '23505' });
});

/**
 * 40 rows whose batch costs 150 ms a row (a 1 MB event to 10 subscribers on PostgreSQL 15 takes
 * about that): a batch of more than 13 rows passes the 2 s timeout. An 8 s budget has room for
 * four timeouts, 500 → 250 → 125 → 62, all of them too large.
 */
function slowRows() {
  let t = 0;
  let left = 40;
  const sizes: number[] = [];
  const scheduler = { now: () => t } as never;
  const batch = async (limit: number) => {
    sizes.push(limit);
    const cost = Math.min(limit, left) * 150;
    t += Math.min(cost, 2_000);
    if (cost > 2_000) throw sqlError('57014');
    const n = Math.min(limit, left);
    left -= n;
    return n;
  };
  return { batch, scheduler, sizes, left: () => left };
}
const outboxLike = { batchSize: 500, batchTimeoutMs: 2_000, passBudgetMs: 8_000 };

test('without a carry each pass starts at the full size again: a pass whose budget ends before the halving reaches a size that fits takes nothing, every time', async () => {
  const rows = slowRows();
  for (let pass = 0; pass < 5; pass++) expect(await runBatches(rows.batch, outboxLike, { what: 'test', scheduler: rows.scheduler })).toMatchObject({ taken: 0, timeouts: 4 });
  expect(rows.left()).toBe(40);
});

test('with a carry a pass starts at the size the last one ended with: the rows are taken within three passes; a full batch that took at most a quarter of the timeout doubles the size, up to batchSize', async () => {
  const rows = slowRows();
  const carry: BatchCarry = {};
  let passes = 0;
  while (rows.left() > 0 && passes < 10) {
    await runBatches(rows.batch, outboxLike, { what: 'test', scheduler: rows.scheduler, carry });
    passes++;
  }
  expect(rows.left()).toBe(0);
  expect(passes).toBeLessThanOrEqual(3);
  expect(rows.sizes.slice(0, 7)).toEqual([500, 250, 125, 62, 31, 15, 7]);
  expect(carry.batchSize).toBe(7);

  // Fast batches again: each full one doubles the size, to the settings' batchSize and no further.
  const sizes: number[] = [];
  const fast = await runBatches(async (limit) => (sizes.push(limit), sizes.length < 10 ? limit : 0), { ...settings, batchSize: 100 }, { what: 'test', carry, scheduler: { now: () => 0 } as never });
  expect(sizes).toEqual([7, 14, 28, 56, 100, 100, 100, 100, 100, 100]);
  expect(fast).toMatchObject({ complete: true, batchSize: 100 });
  expect(carry.batchSize).toBe(100);
});

test("sys.retention's fires carry their batch size: each pass goes on from the size the last one halved to, so a pass with room for one batch still reaches a size that fits", async () => {
  const sizes: number[] = [];
  let left = 20;
  const ledger = {
    pruneJobs: async ({ limit }: { limit: number }) => {
      sizes.push(limit);
      if (limit > 8) throw sqlError('57014');
      const n = Math.min(limit, left);
      left -= n;
      return n;
    },
  };
  const definition = retentionDefinition({ ledger: ledger as never, namespace: 'n' });
  const ctx = { signal: new AbortController().signal, logger: { info() {}, debug() {}, warn() {} } } as never;
  // A budget of 0: one batch per pass.
  for (let fire = 0; fire < 6; fire++) await definition.handler({ batchSize: 64, passBudgetMs: 0 }, ctx);
  expect(sizes).toEqual([64, 32, 16, 8, 16, 8]);
  expect(left).toBe(4);
  // Another worker's definition has its own carry, from the full size.
  await retentionDefinition({ ledger: ledger as never, namespace: 'n' }).handler({ batchSize: 64, passBudgetMs: 0 }, ctx);
  expect(sizes.at(-1)).toBe(64);
});
