// A stored schedule this worker cannot parse (a zone its ICU does not know, a cron a newer build
// accepted) stays unarmed: the schedules pass says so in a warn line naming it, once per schedule
// per worker, not at every pass (docs/schedules.md, "How a fire happens").
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createWorker, defineJob } from '../../src';
import { useTestDatabase } from '../helpers/db';

const { db } = useTestDatabase();

test('a stored schedule with a zone or cron this worker cannot parse is named in one warn line per schedule, with its cron, zone and error; the others are armed', async () => {
  const namespace = `unparsable-${randomUUID().slice(0, 8)}`;
  const tick = defineJob({ name: 'tick', handler: () => undefined });
  const insert = (name: string, cron: string, zone: string) =>
    db.query(`insert into acta.schedules (namespace, name, definition, cron, time_zone, source) values ($1, $2, 'tick', $3, $4, 'runtime')`, [namespace, name, cron, zone]);
  await insert('mars', '0 2 * * *', 'Mars/Olympus_Mons'); // stored by a Node whose ICU knew it
  await insert('odd', '0 2 * * * * *', 'UTC');
  await insert('fine', '0 2 * * *', 'Europe/Berlin');
  const lines: { level: number; msg: string; schedule?: string; cron?: string; timeZone?: string; err?: { message: string } }[] = [];
  const logger = pino({ level: 'warn' }, new Writable({ write: (chunk, _enc, done) => (lines.push(JSON.parse(String(chunk))), done()) }));
  const w = createWorker({ db, namespace, logger, listen: false, heartbeatIntervalMs: 100, definitions: [tick] });
  await w.start();
  await new Promise((r) => setTimeout(r, 800)); // several schedules passes
  await w.stop();
  const said = lines.filter((l) => l.schedule !== undefined).map((l) => [l.schedule, l.cron, l.timeZone, typeof l.err?.message]);
  expect(said.sort()).toEqual([
    ['mars', '0 2 * * *', 'Mars/Olympus_Mons', 'string'],
    ['odd', '0 2 * * * * *', 'UTC', 'string'],
  ]);
  const { rows } = await db.query<{ name: string; armed: boolean }>('select name, job_id is not null as armed from acta.schedules where namespace = $1 order by name', [namespace]);
  expect(rows).toEqual([{ name: 'fine', armed: true }, { name: 'mars', armed: false }, { name: 'odd', armed: false }]);
});
