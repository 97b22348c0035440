// connect refuses what it would otherwise ignore: an unknown option (`uri`) or a URL given bare
// connected to DATABASE_URL (or created the embedded default in ./.acta/data) instead.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../src/errors';
import { connect } from '../src/db/connect';

test.each([
  [{ uri: 'postgres://nobody@127.0.0.1:1/none' }, /^unknown connect option "uri"; known: url, dataDir, max$/],
  [{ url: 'postgres://nobody@127.0.0.1:1/none', datadir: '/tmp/x' }, /^unknown connect option "datadir"/],
  ['postgres://nobody@127.0.0.1:1/none', /^connect takes options \{ url\?, dataDir\?, max\? \}: give a connection string as connect\(\{ url \}\), got a string$/],
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
