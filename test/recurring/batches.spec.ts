// A recurring pass's batches (src/recurring/batches.ts, runBatches): a batch that times out, or is
// too large for one statement, is halved down to 1 row; any other error ends the pass.
import { runBatches } from '../../src/recurring/batches';

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
