import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { createPgliteDb } from '../src';

// A claim answered by the process holding a PGlite folder is on disk when that process is killed:
// its workers, and other processes' through its socket, run what it answered, and a claim lost
// with it came back `ready` and was claimed again under the same (job, execution, holder), so the
// lost attempt's completion was written over the new one (docs/how-it-works.md, Durability).
describe('a claim on PGlite outlives a SIGKILL of the process that made it', () => {
  test('the claimed row is still executing, with its execution number, when the folder is opened again', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'acta-claim-kill-'));
    try {
      const child = spawn(process.execPath, ['test/fixtures/claim-then-hold.js', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('\n')) resolve(out.trim());
        });
        child.once('exit', (code) => reject(new Error(`the fixture exited (${code}) before claiming`)));
      });
      const [, id, execution] = line.split(' ');
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const db = await createPgliteDb({ dataDir: dir, share: false });
      try {
        const { rows } = await db.query<{ status: string; execution: number }>('select status, execution from acta.jobs where id = $1', [id]);
        expect(rows).toEqual([{ status: 'executing', execution: Number(execution) }]);
      } finally {
        await db.close();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
