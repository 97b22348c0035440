// A database's failure reaches the user as the driver's own error, not wrapped in an ActaError, with
// the driver's code (an errno, or the SQLSTATE the server answered), and the package's
// isTransientDbError tells an outage from a mistake (docs/reference.md, "Errors"). Real PostgreSQL,
// and a port nothing listens on.
import * as net from 'node:net';
import { ActaError, connect, createClient, isTransientDbError } from '../../src';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

/** A loopback port that refuses connections: one the system gave and took back. */
async function refusedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

test('a client of a server that refuses the connection: enqueue and getJob reject with the driver\'s ECONNREFUSED, no ActaError, and transient', async () => {
  const refused = await connect({ url: `postgres://u@127.0.0.1:${await refusedPort()}/nodb` });
  try {
    const client = createClient({ db: refused, force: true });
    for (const call of [() => client.enqueue('send-mail', { to: 'ada@example.com' }), () => client.getJob('1')]) {
      const err = await call().then(() => null, (e: unknown) => e);
      expect(err).not.toBeInstanceOf(ActaError);
      expect(err).toMatchObject({ name: 'Error', code: 'ECONNREFUSED', message: expect.stringContaining('ECONNREFUSED') });
      expect(isTransientDbError(err)).toBe(true);
    }
  } finally {
    await refused.close();
  }
});

test("a server's answer is the driver's error with its SQLSTATE: a unique violation in the user's transaction and a syntax error are not transient, a terminated session is", async () => {
  await db.query('create table users (email text primary key)');
  const client = createClient({ db, force: true });
  const unique = await db
    .transaction(async (tx) => {
      await client.enqueue('welcome', { email: 'ada@example.com' }, { tx });
      await tx.query('insert into users values ($1)', ['ada@example.com']);
      await tx.query('insert into users values ($1)', ['ada@example.com']);
    })
    .then(() => null, (e: unknown) => e);
  expect(unique).not.toBeInstanceOf(ActaError);
  expect(unique).toMatchObject({ code: '23505', constraint: 'users_pkey' });
  expect(isTransientDbError(unique)).toBe(false);

  const syntax = await db.query('selec 1').then(() => null, (e: unknown) => e);
  expect(syntax).not.toBeInstanceOf(ActaError);
  expect(syntax).toMatchObject({ code: '42601' });
  expect(isTransientDbError(syntax)).toBe(false);

  // The server ending the session (pg_terminate_backend, as a restart or failover does): 57P01.
  const terminated = await db.query('select pg_terminate_backend(pg_backend_pid())').then(() => null, (e: unknown) => e);
  expect(terminated).not.toBeInstanceOf(ActaError);
  expect(terminated).toMatchObject({ code: '57P01' });
  expect(isTransientDbError(terminated)).toBe(true);
  // One argument: as a callback of map() or some(), the index is not taken for a depth (from 5 on it
  // said false before).
  expect([unique, syntax, unique, syntax, unique, terminated].map(isTransientDbError)).toEqual([false, false, false, false, false, true]);
});
