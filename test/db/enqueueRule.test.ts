// Which jobs a client enqueues by name (docs/reference.md, "Which definitions a client may
// enqueue"; src/policies/enqueueRule.ts): without its definitions, a client refuses what the
// namespace's stored definitions say would never run (no worker declared the name there) or run
// unlimited (a declared concurrency, rate or lane policy without its key), with a typed error that
// names the fix and writing nothing; `force` enqueues it anyway; a definition at hand decides
// itself. The same rule as `acta enqueue` (test/cli.test.ts).
import { randomUUID } from 'node:crypto';
import { createClient, createWorker, type Definition, defineJob, EnqueueRefusedError } from '../../src';
import { registerWorker } from '../../src/db/workers';
import { declaredPolicy } from '../../src/definition';
import { useTestDatabase, withPgClient } from '../helpers/db';
import { silentLogger } from '../helpers/silentLogger';
import { waitFor } from '../helpers/wait';

const { db, tdb } = useTestDatabase();

const jobsIn = async (namespace: string) => Number((await db.query<{ n: string }>('select count(*) as n from acta.all_jobs where namespace = $1', [namespace])).rows[0].n);
const limited = defineJob({ name: 'limited', concurrency: { key: (p: { tenant: string }) => p.tenant, limit: 1 }, handler: () => undefined });
const plain = defineJob({ name: 'plain', handler: () => undefined });
const declare = (namespace: string, definitions: Definition[] = [limited, plain]) =>
  registerWorker(db, {
    workerId: randomUUID(),
    namespace,
    hostname: 'test',
    pid: 1,
    definitions: definitions.map((d) => d.name),
    maxAttempts: definitions.map(() => null),
    leaseMs: 60_000,
    policies: Object.fromEntries(definitions.map((d) => [d.name, declaredPolicy(d)])),
  });

test('a name no worker declared in the namespace is refused (it would never run), naming the fix; force enqueues it; nothing is written before', async () => {
  const namespace = `rule-${randomUUID()}`;
  const client = createClient({ db, namespace });
  const fresh = client.enqueue('plain', {});
  await expect(fresh).rejects.toBeInstanceOf(EnqueueRefusedError);
  await expect(fresh).rejects.toMatchObject({
    code: 'ACTA_UNKNOWN_DEFINITION',
    refusal: { namespace, name: 'plain', missing: [] },
    message: `no worker has declared any job definition in namespace "${namespace}" yet (a worker declares its definitions when it starts), so none runs "plain"; start its worker first, or to enqueue it anyway (a definition whose worker has not started yet): the enqueue option { force: true }`,
  });
  expect(await jobsIn(namespace)).toBe(0);
  await declare(namespace);
  await declare(`${namespace}-b`, [defineJob({ name: 'elsewhere', handler: () => undefined })]);
  await expect(client.enqueue('elsewhere', {})).rejects.toMatchObject({
    code: 'ACTA_UNKNOWN_DEFINITION',
    message: `no worker has declared a job definition named "elsewhere" in namespace "${namespace}"; declared there: "limited", "plain"; "elsewhere" is declared in namespace "${namespace}-b" (the client's namespace "${namespace}-b"); to enqueue it anyway (a definition whose worker has not started yet): the enqueue option { force: true }`,
  });
  expect(await jobsIn(namespace)).toBe(0);
  await expect(client.enqueue('later', {}, { force: true })).resolves.toMatchObject({ created: true });
  await expect(createClient({ db, namespace, force: true }).enqueue('later', {})).resolves.toMatchObject({ created: true });
  await expect(client.enqueue('plain', {})).resolves.toMatchObject({ created: true });
  expect(await jobsIn(namespace)).toBe(3);
});

test('a declared concurrency policy needs its key: by name without one is refused (it would run unlimited); with the key, the definition itself, or a client given its definitions, it runs one at a time', async () => {
  const namespace = `rule-${randomUUID()}`;
  let running = 0;
  let most = 0;
  const slow = defineJob({
    name: 'limited',
    concurrency: { key: (p: { tenant: string }) => p.tenant, limit: 1 },
    handler: async () => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, 30));
      running--;
    },
  });
  const worker = createWorker({ db, namespace, definitions: [slow], logger: silentLogger, heartbeatIntervalMs: 1_000 });
  await worker.start();
  try {
    const client = createClient({ db, namespace });
    await expect(client.enqueue('limited', { tenant: 'a' })).rejects.toMatchObject({
      code: 'ACTA_POLICY_KEY_MISSING',
      refusal: { name: 'limited', missing: ['concurrency'] },
      message: 'definition "limited" declares concurrency policy: its jobs need keys, which its key functions compute from the payload; give enqueue the definition itself (or the client its `definitions`) to compute them, or concurrencyKey',
    });
    // enqueueMany names the item, and writes none of the batch.
    await expect(client.enqueueMany([{ definition: 'limited', payload: { tenant: 'a' }, concurrencyKey: 'a' }, { definition: 'limited', payload: { tenant: 'a' } }])).rejects.toMatchObject({
      code: 'ACTA_POLICY_KEY_MISSING',
      item: 1,
      message: expect.stringMatching(/^enqueueMany item 1: definition "limited" declares concurrency policy/),
    });
    expect(await jobsIn(namespace)).toBe(0);
    await client.enqueue('limited', { tenant: 'a' }, { concurrencyKey: 'a' });
    await client.enqueue(slow, { tenant: 'a' });
    await client.enqueueMany([{ definition: slow, payload: { tenant: 'a' } }]);
    await createClient({ db, namespace, definitions: [slow] }).enqueueMany([1, 2].map(() => ({ definition: 'limited', payload: { tenant: 'a' } })));
    await waitFor(async () => (await db.query<{ n: string }>(`select count(*) as n from acta.all_jobs where namespace = $1 and status = 'succeeded'`, [namespace])).rows[0].n === '5' || undefined, 'the five jobs to run', 20_000);
    expect(most).toBe(1);
  } finally {
    await worker.stop();
  }
});

test('a declared rate or lane policy needs its key too: by name without it is refused naming each missing key and its option; with the options it is accepted', async () => {
  const namespace = `rule-${randomUUID()}`;
  const metered = defineJob({ name: 'metered', rate: { key: (p: { account: string }) => p.account, limit: 5, perMs: 60_000 }, handler: () => undefined });
  const ordered = defineJob({ name: 'ordered', lane: (p: { order: string }) => p.order, handler: () => undefined });
  const both = defineJob({ name: 'both', rate: { key: (p: { a: string }) => p.a, limit: 5, perMs: 60_000 }, lane: (p: { a: string }) => p.a, handler: () => undefined });
  await declare(namespace, [metered, ordered, both]);
  const client = createClient({ db, namespace });
  await expect(client.enqueue('metered', { account: 'x' })).rejects.toMatchObject({ code: 'ACTA_POLICY_KEY_MISSING', refusal: { name: 'metered', missing: ['rate'] }, message: expect.stringMatching(/declares rate policy: .*, or rateKey$/) });
  await expect(client.enqueue('ordered', { order: 'o1' })).rejects.toMatchObject({ code: 'ACTA_POLICY_KEY_MISSING', refusal: { name: 'ordered', missing: ['lane'] }, message: expect.stringMatching(/declares lane policy: .*, or lane$/) });
  await expect(client.enqueue('both', { a: 'x' }, { rateKey: 'x' })).rejects.toMatchObject({ refusal: { name: 'both', missing: ['lane'] } });
  expect(await jobsIn(namespace)).toBe(0);
  await client.enqueue('metered', { account: 'x' }, { rateKey: 'x' });
  await client.enqueue('ordered', { order: 'o1' }, { lane: 'o1' });
  await client.enqueue('both', { a: 'x' }, { rateKey: 'x', lane: 'x' });
  const { rows } = await db.query<{ definition: string; rate_key: string | null; lane: string | null }>('select definition, rate_key, lane from acta.jobs where namespace = $1 order by id', [namespace]);
  expect(rows).toEqual([
    { definition: 'metered', rate_key: 'x', lane: null },
    { definition: 'ordered', rate_key: null, lane: 'o1' },
    { definition: 'both', rate_key: 'x', lane: 'x' },
  ]);
});

test('a concurrency or rate key for a policy the definition does not declare is refused (it would limit nothing of its own, yet join another definition\'s limit or meter of that key), in the words of the library and of acta enqueue', async () => {
  const namespace = `rule-${randomUUID()}`;
  await declare(namespace);
  const client = createClient({ db, namespace });
  await expect(client.enqueue('plain', {}, { rateKey: 'api' })).rejects.toMatchObject({
    code: 'ACTA_POLICY_KEY_UNUSED',
    refusal: { name: 'plain', missing: [], unused: ['rate'] },
    message: 'definition "plain" declares no rate policy: rateKey would limit nothing of its own (and join another definition\'s limit or meter of that key); leave it out',
  });
  await expect(client.enqueue('limited', { tenant: 'a' }, { concurrencyKey: 'a', rateKey: 'api' })).rejects.toMatchObject({ code: 'ACTA_POLICY_KEY_UNUSED', refusal: { unused: ['rate'] } });
  expect(await jobsIn(namespace)).toBe(0);
  // A client given the definition refuses it itself, before the database (src/client/client.ts).
  await expect(createClient({ db, namespace, definitions: [plain] }).enqueue(plain, {}, { concurrencyKey: 'x' })).rejects.toThrow(/has no concurrency policy/);
  await client.enqueue('plain', {});
  expect(await jobsIn(namespace)).toBe(1);
});

test("in the caller's transaction: an accepted enqueue commits with it; a refused one rejects (the transaction is aborted, as by any failed statement) and leaves nothing", async () => {
  const namespace = `rule-${randomUUID()}`;
  await declare(namespace);
  const client = createClient({ db, namespace });
  await withPgClient(tdb.url, async (tx) => {
    await tx.query('begin');
    await client.enqueue('plain', { n: 1 }, { tx });
    await tx.query('commit');
    await tx.query('begin');
    await client.enqueue('plain', { n: 2 }, { tx });
    await expect(client.enqueue('limited', { tenant: 'a' }, { tx })).rejects.toMatchObject({ code: 'ACTA_POLICY_KEY_MISSING' });
    await tx.query('rollback');
  });
  expect((await db.query<{ payload: unknown }>('select payload from acta.jobs where namespace = $1', [namespace])).rows).toEqual([{ payload: { n: 1 } }]);
});
