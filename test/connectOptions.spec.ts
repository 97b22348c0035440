// connect refuses what it would otherwise ignore: an unknown option (`uri`) or a URL given bare
// connected to DATABASE_URL (or created the embedded default in ./.acta/data) instead.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../src/errors';
import { connect } from '../src/db/connect';
import { createPgDb } from '../src/db/pgDb';

test.each([
  [{ uri: 'postgres://nobody@127.0.0.1:1/none' }, /^unknown connect option "uri"; known: url, dataDir, max, listenUrl$/],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', datadir: '/tmp/x' }, /^unknown connect option "datadir"/],
  ['postgres://nobody@127.0.0.1:1/none', /^connect takes options \{ url\?, dataDir\?, max\?, listenUrl\? \}: give a connection string as connect\(\{ url \}\), got a string$/],
  // LISTEN's own URL (a direct connection beside a pooler) goes with a server, and is a URL.
  [{ listenUrl: 'postgres://nobody@127.0.0.1:1/none' }, /^connect's listenUrl is for a PostgreSQL server's LISTEN connections; this opens PGlite at /],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', listenUrl: 'not-a-url' }, /^the connection string \(ACTA_LISTEN_URL, connect\(\{ listenUrl \}\) or listenConnectionString\) is not a URL/],
  // An empty url or dataDir (an environment variable set empty) opened the fallback, as if none was given.
  [{ url: '' }, /^connect's url is empty: give a connection string \(postgres:\/\/\.\.\.\), or leave url out for DATABASE_URL \(else the embedded database\)$/],
  [{ dataDir: '' }, /^connect's dataDir is empty: give a folder, or leave dataDir out/],
  // The pool size: -1 left every statement waiting for good (pg's pool never handed out a connection); 1.5 and 'x' were taken.
  [{ url: 'postgres://nobody@127.0.0.1:1/none', max: -1 }, /^max must be an integer between 1 and 10000, got -1$/],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', max: 0 }, /^max must be an integer between 1 and 10000, got 0$/],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', max: 1.5 }, /^max must be an integer between 1 and 10000, got 1.5$/],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', max: 'x' }, /^max must be an integer between 1 and 10000, got "x"$/],
])('connect(%j) is refused with a ConfigError, opening nothing', async (options, message) => {
  const cwd = process.cwd();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-connect-'));
  const env = process.env.DATABASE_URL;
  delete process.env.DATABASE_URL; // what the bad option would have fallen back to: the embedded default here
  process.chdir(dir);
  try {
    const refused = await connect(options as never).then(() => undefined, (err: unknown) => err);
    expect(refused).toBeInstanceOf(ConfigError);
    expect((refused as Error).message).toMatch(message);
    expect(fs.readdirSync(dir)).toEqual([]); // no ./.acta/data
  } finally {
    process.chdir(cwd);
    if (env !== undefined) process.env.DATABASE_URL = env;
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test.each([
  [null, /^createPgDb takes options: \{ connectionString \} or \{ pool \} \(connect\(\{ url \}\) takes a URL\), got null$/],
  ['postgres://nobody@127.0.0.1:1/none', /^createPgDb takes options: .*, got string$/],
  [5, /, got number$/],
  // A misspelt key was ignored: the pool went to the PG* environment's defaults.
  [{ connectionstring: 'postgres://nobody@127.0.0.1:1/none' }, /^unknown createPgDb option "connectionstring"; known: connectionString, max, pool, ownsPool, listenConnectionString$/],
])('createPgDb(%j) is refused with a ConfigError', (options, message) => {
  expect(() => createPgDb(options as never)).toThrow(ConfigError);
  expect(() => createPgDb(options as never)).toThrow(message);
});

test('ACTA_LISTEN_URL goes with DATABASE_URL: read beside it, not beside a url given in code', async () => {
  const saved = { DATABASE_URL: process.env.DATABASE_URL, ACTA_LISTEN_URL: process.env.ACTA_LISTEN_URL };
  process.env.DATABASE_URL = 'postgres://nobody@127.0.0.1:1/none';
  process.env.ACTA_LISTEN_URL = 'not-a-url'; // refused where it is read
  try {
    await expect(connect()).rejects.toThrow(/^the connection string \(ACTA_LISTEN_URL, /);
    const db = await connect({ url: 'postgres://nobody@127.0.0.1:1/none' });
    await db.close();
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
});
