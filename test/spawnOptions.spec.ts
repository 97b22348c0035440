// A child's options are refused as enqueue's are, with the same typed error and message
// (src/workflows/children.ts, spawnRows; enqueue's in test/db/enqueue.test.ts).
import { ConfigError } from '../src/errors';
import { spawnRows } from '../src/workflows/children';

test.each([
  [{ priority: 1.5 }, /^priority must be an integer between -2147483647 and 2147483647, got 1.5$/],
  [{ priority: 2 ** 31 }, /^priority must be an integer between -2147483647 and 2147483647, got 2147483648$/],
  [{ priority: '5' }, /^priority must be an integer between -2147483647 and 2147483647, got "5"$/],
  [{ maxAttempts: 0 }, /^maxAttempts must be an integer between 1 and 2147483647, got 0$/],
  [{ maxAtempts: 3 }, /^unknown spawn option "maxAtempts"/],
  [{ force: 'yes' }, /^force must be a boolean, got string$/],
  // As enqueue's: a Date timestamptz holds (one before 4713 BC failed the spawn's statement, 22008,
  // and was retried), and what was given named.
  [{ runAt: new Date(-8.64e15) }, /^runAt must be a valid Date from 4713 BC on \(timestamptz\), got -271821-04-20T00:00:00.000Z$/],
  [{ runAt: new Date('soon') }, /^runAt must be a valid Date from 4713 BC on \(timestamptz\), got an Invalid Date$/],
  [{ runAt: 1_700_000_000_000 }, /^runAt must be a valid Date from 4713 BC on \(timestamptz\), got number 1700000000000 \(a Date is needed: new Date\(ms\)\)$/],
])('a child with %j is refused with a ConfigError', (options, message) => {
  const spawn = () => spawnRows([{ definition: 'child', payload: {}, ...options } as never]);
  expect(spawn).toThrow(ConfigError);
  expect(spawn).toThrow(message);
});

test('valid options become the rows enqueue writes', () => {
  const { rows, failParent } = spawnRows([{ definition: 'child', payload: { n: 1 }, priority: -3, maxAttempts: 2 }]);
  expect(rows.definitions).toEqual(['child']);
  expect(rows.priorities).toEqual([-3]);
  expect(failParent).toEqual([false]);
});

test("a child the worker has no definition of is checked by the enqueue's Rule unless forced; one given as an object, or one the worker runs, is not, and its keys are computed as an enqueue's", () => {
  const limited = { name: 'limited', concurrency: { key: (p: { account: string }) => p.account, limit: 1 }, lane: () => 'L' };
  const known = (name: string) => (name === 'limited' ? limited : undefined);
  const { rows } = spawnRows(
    [
      { definition: 'child', payload: 1 },
      { definition: 'child', payload: 2, force: true },
      { definition: { name: 'child' }, payload: 3 },
      { definition: 'limited', payload: { account: 'a' } },
      { definition: limited, payload: { account: 'b' }, lane: 'M' },
    ],
    known,
  );
  expect(rows.checks).toEqual([true, false, false, false, false]);
  expect(rows.concurrencyKeys).toEqual([null, null, null, 'a', 'b']);
  expect(rows.lanes).toEqual([null, null, null, 'L', 'M']);
});

test("a concurrencyKey or rateKey given for a child whose definition has no such policy is refused as enqueue refuses it (it would count in another definition's limit of that key)", () => {
  const plain = { name: 'plain' };
  const known = (name: string) => (name === 'plain' ? plain : undefined);
  for (const definition of ['plain', plain]) {
    expect(() => spawnRows([{ definition, payload: {}, concurrencyKey: 'k' }], known)).toThrow(new ConfigError('concurrencyKey: definition "plain" has no concurrency policy'));
    expect(() => spawnRows([{ definition, payload: {}, rateKey: 'k' }], known)).toThrow(new ConfigError('rateKey: definition "plain" has no rate policy'));
  }
  // A child of a definition the worker does not have is the enqueue Rule's to refuse (rows.checks).
  expect(spawnRows([{ definition: 'other', payload: {}, concurrencyKey: 'k' }], known).rows.checks).toEqual([true]);
});
