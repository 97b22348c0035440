// describeValue(): how a value that is not an Error (thrown, or as a cause) is named in a stored
// error. The JSON form JSON.stringify writes, for small values; for large ones the start of it,
// from a walk that stops at 1,000 characters or 5,000 members instead of serialising all of the
// value first (docs/decisions/2026-12-02-bounded-error-descriptions.md: a 20 MB Buffer cause took
// 1.4 s, a boxed string of 1e7 characters 35.8 s, a Proxy of a typed array 32.5 s). Sizes and
// contents are asserted here, never times.
import { describeValue } from '../src/worker/describeValue';

class Point {
  x = 1;
  skipped = undefined;
  method(): number {
    return this.x;
  }
}

test('small values are described as JSON.stringify writes them', () => {
  const values: unknown[] = [
    { a: 1, b: [1, undefined, () => 1, Symbol('s')], c: { d: 'é\u2028"quoted"\n' } },
    [Number.NaN, Infinity, -0, 1e21, 1e-7],
    new Date(0),
    { toJSON: () => ({ z: 1 }) },
    { a: { toJSON: () => undefined }, b: 2 },
    { x: undefined, y: 1 },
    { y: 1, x: undefined },
    new Point(),
    new Map([[1, 2]]),
    Object.create({ inherited: 1 }),
    [[[]]],
    null,
    true,
    42,
    new String('boxed'),
    new Number(7),
    new Boolean(false),
    { toJSON: () => new String('abc') }, // toJSON first, then the boxed value
    [{ toJSON: () => new Number(5) }],
    Object(Symbol('boxed')),
    { a: Object(Symbol('boxed')) },
    Object.create(Object.defineProperty({}, 'hidden', { value: 1, enumerable: false })),
  ];
  for (const value of values) expect(describeValue(value)).toBe(JSON.stringify(value));
  expect(describeValue('a string as it is')).toBe('a string as it is');
  expect(describeValue(10n)).toBe('10n');
  expect(describeValue(10n ** 1_000n)).toBe('<a bigint of over 1000 digits>'); // not its 1,001 digits (1n << 4_000_000n: 1.2 s)
  expect(describeValue(-(10n ** 1_000n - 1n))).toHaveLength(1_001); // 1,000 digits and a sign: cut, as everything
  expect(describeValue({ n: -(10n ** 2_000n) })).toBe('{"n":<a bigint of over 1000 digits>}');
  expect(describeValue(undefined)).toBe('undefined');
});

test('large values: the start of their JSON form, at most 1,000 characters and a mark where cut', () => {
  const rows = describeValue({ status: 500, rows: Array.from({ length: 100_000 }, (_, i) => ({ i })) });
  expect(rows).toMatch(/^\{"status":500,"rows":\[\{"i":0\},\{"i":1\},/);
  expect(rows).toHaveLength(1_001);
  expect(rows.endsWith('…')).toBe(true);
  expect(describeValue(new String('x'.repeat(10_000_000)))).toBe(`"${'x'.repeat(999)}…`);
  expect(describeValue({ ['k'.repeat(100_000)]: 1 })).toHaveLength(1_001);
  // Members JSON leaves out write nothing, but are counted: 400 visits of 10,000 undefined members.
  const empty: Record<string, undefined> = {};
  for (let i = 0; i < 10_000; i++) empty[`k${i}`] = undefined;
  expect(describeValue(new Array(400).fill(empty))).toBe('[{…');
});

test('binary data by type and size, a Proxy by name, a cycle marked; a value that throws when read by what was written', () => {
  expect(describeValue(Buffer.alloc(20_000_000))).toBe('<Buffer of 20000000 bytes>');
  expect(describeValue({ body: new Uint8Array(5), view: new DataView(new ArrayBuffer(3)) })).toBe('{"body":"<Uint8Array of 5 bytes>","view":"<DataView of 3 bytes>"}');
  expect(describeValue({ p: new Proxy(new Uint8Array(5_000_000), {}) })).toBe('{"p":"[a Proxy]"}');
  expect(describeValue(new Proxy({}, {}))).toBe('[a Proxy]');
  expect(describeValue({ toJSON: () => new Proxy(new Uint8Array(500_000), {}) })).toBe('"[a Proxy]"'); // what toJSON returns is checked too
  // Objects that inherit many keys JSON does not read: their own keys only (for...in took 17 s).
  const shared = {};
  for (let i = 0; i < 50_000; i++) Object.defineProperty(shared, `k${i}`, { value: 1, enumerable: false });
  const inheriting = describeValue(Array.from({ length: 400 }, () => Object.create(shared)));
  expect(inheriting).toMatch(/^\[\{\}(,\{\})+,?\{?…$/); // {} each, as JSON writes them, cut at 1,000 characters
  expect(inheriting).toHaveLength(1_001);
  const cycle: Record<string, unknown> = { x: 1 };
  cycle.self = cycle;
  expect(describeValue(cycle)).toBe('{"x":1,"self":"[Circular]"}');
  const throwing = [new Uint8Array(2_000_000), { toJSON: () => { throw new Error('no'); } }];
  expect(describeValue(throwing)).toBe('["<Uint8Array of 2000000 bytes>",…'); // not String(): 2 million joined bytes
  expect(describeValue({ get a() { throw new Error('no'); } })).toBe('{"a":…');
});
