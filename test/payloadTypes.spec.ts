// defineJob's payload type is what the handler receives after the JSON round trip (src/definition.ts,
// JsonPayload). The @ts-expect-error lines are checked by `npm run typecheck` (tsc over test/): each
// fails the typecheck if its payload type compiles; the test itself checks the accepted ones at runtime.
import { createClient, createPgliteDb, defineJob, type JsonPayload } from '../src';

interface Order {
  id: string;
  total: number;
  paid: boolean;
  note: string | null;
  coupon?: string;
  lines: { sku: string; qty: number }[];
  meta: Record<string, unknown>;
  pair: [string, number];
}
interface Tree {
  name: string;
  children: Tree[];
}

test('payload types that survive JSON compile; Date, Map, Set, bigint, functions and typed arrays in them do not', async () => {
  const order = defineJob<Order>({ name: 'order', handler: (p) => p.lines.length });
  const tree = defineJob<Tree>({ name: 'tree', handler: (p) => p.children.length });
  const inferred = defineJob({ name: 'inferred', handler: (p: { at: string; tags: readonly string[] }) => p.at });
  const untyped = defineJob({ name: 'untyped', handler: (p) => p });
  const anyPayload = defineJob<any>({ name: 'any', handler: (p) => p });

  // @ts-expect-error: a Date arrives as its ISO string
  defineJob<{ at: Date }>({ name: 'date', handler: () => undefined });
  // @ts-expect-error: inferred from the handler's own annotation as well
  defineJob({ name: 'date-inferred', handler: (p: { at: Date }) => p.at.getTime() });
  // @ts-expect-error: one member of a union that does not survive is enough
  defineJob<{ at: string | Date }>({ name: 'union', handler: () => undefined });
  // @ts-expect-error: nested in an array of objects
  defineJob<{ events: { at: Date }[] }>({ name: 'nested', handler: () => undefined });
  // @ts-expect-error: a Map arrives as {}
  defineJob<{ counts: Map<string, number> }>({ name: 'map', handler: () => undefined });
  // @ts-expect-error: a Set arrives as {}
  defineJob<{ ids: Set<string> }>({ name: 'set', handler: () => undefined });
  // @ts-expect-error: a bigint is refused at enqueue (InvalidJsonError)
  defineJob<{ n: bigint }>({ name: 'bigint', handler: () => undefined });
  // @ts-expect-error: a method does not travel
  defineJob<{ id: string; total(): number }>({ name: 'method', handler: () => undefined });
  // @ts-expect-error: a Buffer arrives as { type: 'Buffer', data: [...] }
  defineJob<{ body: Buffer }>({ name: 'buffer', handler: () => undefined });
  // @ts-expect-error: the payload itself, not only its members
  defineJob<Date>({ name: 'top-level', handler: () => undefined });

  // The type itself: the offending member becomes never.
  const shape: JsonPayload<{ at: Date; id: string }> = { id: 'x' } as { at: never; id: string };
  void shape;

  // What compiles arrives as typed: one job through the embedded database.
  const db = await createPgliteDb({ dataDir: 'memory://' });
  try {
    const { migrate } = await import('../src');
    await migrate(db);
    const client = createClient({ db });
    const payload: Order = { id: 'o1', total: 9.5, paid: false, note: null, lines: [{ sku: 'a', qty: 2 }], meta: { k: [1] }, pair: ['p', 1] };
    await client.enqueue(order, payload);
    const { rows } = await db.query<{ payload: Order }>('select payload from acta.jobs');
    expect(rows[0].payload).toEqual(payload);
  } finally {
    await db.close();
  }
  expect([order.name, tree.name, inferred.name, untyped.name, anyPayload.name]).toEqual(['order', 'tree', 'inferred', 'untyped', 'any']);
});
