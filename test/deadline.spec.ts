/**
 * withDeadline (src/db/Db.ts): every call goes through the Db it is given, carrying
 * `{ deadlineMs }` as its last argument, so a wrapper of a Db (a spread, a Proxy) still sees the
 * worker's calls and passes the deadline on when it passes that argument (docs/reference.md,
 * "Databases"; the deadline itself on a server: test/faults/partition.test.ts).
 */
import { type CallOptions, type Db, withDeadline } from '../src';

function recordingDb(withPrepared: boolean): { db: Db; calls: unknown[][] } {
  const calls: unknown[][] = [];
  const db: Db = {
    kind: 'postgres',
    query: async (...args: unknown[]) => (calls.push(['query', ...args]), { rows: [] }),
    ...(withPrepared ? { prepared: async (...args: unknown[]) => (calls.push(['prepared', ...args]), { rows: [] }) } : {}),
    transaction: async (fn, ...rest: unknown[]) => (calls.push(['transaction', ...rest]), fn({ query: async () => ({ rows: [] }) })),
    listen: async (...args: unknown[]) => (calls.push(['listen', ...args]), async () => undefined),
    close: async () => void calls.push(['close']),
  } as Db;
  return { db, calls };
}

test('each call goes through the Db with { deadlineMs } last; listen and close are passed on; prepared stays absent when the Db has none', async () => {
  const { db, calls } = recordingDb(true);
  const timed = withDeadline(db, 5_000);
  await timed.query('select 1', [1]);
  await timed.prepared!('n', 'select $1', [2]);
  await timed.transaction(async (tx) => tx.query('select 2'));
  await timed.listen('ch', { onNotify: () => undefined });
  await timed.close();
  const deadline: CallOptions = { deadlineMs: 5_000 };
  expect(calls).toEqual([
    ['query', 'select 1', [1], deadline],
    ['prepared', 'n', 'select $1', [2], deadline],
    ['transaction', deadline],
    ['listen', 'ch', expect.any(Object), undefined],
    ['close'],
  ]);
  expect(timed.kind).toBe('postgres');
  expect(withDeadline(recordingDb(false).db, 1).prepared).toBeUndefined();
});

test('a Proxy of a Db sees every call of withDeadline (it is not bypassed), and a spread wrapper that passes its arguments on keeps the deadline', async () => {
  const { db, calls } = recordingDb(false);
  const seen: string[] = [];
  const proxy = new Proxy(db, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop === 'query') return (text: string, params?: unknown[]) => (seen.push(text), target.query(text, params));
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  await withDeadline(proxy, 7).query('through the proxy');
  expect(seen).toEqual(['through the proxy']);
  expect(calls.at(-1)).toEqual(['query', 'through the proxy', undefined]); // the Proxy passed two arguments on
  const traced: Db = { ...db, query: (text, params, options) => (seen.push(text), db.query(text, params, options)) };
  await withDeadline(traced, 9).query('traced');
  expect(calls.at(-1)).toEqual(['query', 'traced', undefined, { deadlineMs: 9 }]);
});

test('a deadline of NaN, 0, a negative number or not a number is a ConfigError (each fired at once: every call failed as unanswered)', () => {
  const { db } = recordingDb(false);
  for (const ms of [Number.NaN, 0, -1, '5000']) expect(() => withDeadline(db, ms as never)).toThrow(/^withDeadline: ms must be a number of milliseconds above 0, got /);
  expect(() => withDeadline(db, 2 ** 40)).not.toThrow();
});
