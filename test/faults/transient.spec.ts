/** The SQLSTATE classification of src/db/transient.ts: what is retried, what stops the worker. */
import { isSchemaError, isTransientDbError } from '../../src/db/transient';
import { DbClosedError, EmbeddedShareClosedError } from '../../src/errors';

const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });

test.each([
  ['57P01 admin_shutdown (server stop, pg_terminate_backend)', pgError('57P01')],
  ['57P03 cannot_connect_now (starting up)', pgError('57P03')],
  ['08006 connection_failure (class 08)', pgError('08006')],
  ['08P01 protocol_violation (class 08)', pgError('08P01')],
  ['53300 too_many_connections', pgError('53300')],
  ['40001 serialization_failure', pgError('40001')],
  ['40P01 deadlock_detected', pgError('40P01')],
  ['25006 read_only_sql_transaction (failover)', pgError('25006')],
  ['ECONNREFUSED', pgError('ECONNREFUSED')],
  ['ECONNRESET', pgError('ECONNRESET')],
  ['pg: Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
  ['pg: not queryable', new Error('Client has encountered a connection error and is not queryable')],
  ["pg: its connect timeout (connectionTimeoutMillis)", new Error('timeout expired')],
  ['the connect timeout as src/db/pgDb.ts words it', new Error('the server did not answer the connect within 10000 ms (connect_timeout in the connection string sets it): timeout expired', { cause: new Error('timeout expired') })],
  ['AggregateError of refused connects', Object.assign(new AggregateError([pgError('ECONNREFUSED'), pgError('ECONNREFUSED')], ''), {})],
  ['a wrapped transient cause', new Error('claim failed', { cause: pgError('57P01') })],
  ["ENOENT connecting to a server's Unix socket (removed while it restarts)", Object.assign(pgError('ENOENT', 'connect ENOENT /var/run/postgresql/.s.PGSQL.5432'), { syscall: 'connect', address: '/var/run/postgresql/.s.PGSQL.5432' })],
])('transient: %s', (_name, err) => {
  expect(isTransientDbError(err)).toBe(true);
});

test.each([
  ['42883 undefined_function (schema not migrated)', pgError('42883')],
  ['ENOENT of a file (not a server socket)', Object.assign(pgError('ENOENT'), { syscall: 'open', path: '/tmp/x' })],
  ['42P01 undefined_table', pgError('42P01')],
  ['23505 unique_violation', pgError('23505')],
  ['22P05 untranslatable_character (jsonb \\u0000)', pgError('22P05', 'unsupported Unicode escape sequence')],
  ['22P02 invalid_text_representation', pgError('22P02', 'terminating connection')], // a SQLSTATE decides, not the text
  ['a TypeError', new TypeError('x is not a function')],
  ['a string', 'ECONNREFUSED'],
  ['null', null],
])('not transient: %s', (_name, err) => {
  expect(isTransientDbError(err)).toBe(false);
});

test('schema errors are recognised, so the worker can say "run acta migrate"', () => {
  expect(isSchemaError(pgError('42883'))).toBe(true);
  expect(isSchemaError(pgError('3F000'))).toBe(true);
  expect(isSchemaError(pgError('57P01'))).toBe(false);
});

test('a Db closed under a call is never transient, even when the driver error it carries is', () => {
  const closed = new DbClosedError({ cause: new Error('Connection terminated unexpectedly') });
  expect(isTransientDbError(closed.cause)).toBe(true);
  expect(isTransientDbError(closed)).toBe(false);
});

test("the embedded database's holder gone (EmbeddedShareClosedError) is transient: connect()'s Db opens the folder again at its next call", () => {
  expect(isTransientDbError(new EmbeddedShareClosedError('/tmp/x/acta.sock'))).toBe(true);
  expect(isTransientDbError(new EmbeddedShareClosedError('/tmp/x/acta.sock', { cause: new Error('no holder') }))).toBe(true);
});
