import type { Command } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import { INT4_MAX } from '../../db/types';
import { int, name } from './args';
import type { Client } from '../../client/client';
import { setPausedAnswer } from '../../client/schedules';
import type { Db } from '../../db/Db';
import type { ScheduleRecord } from '../../db/schedules';
import { ConfigError } from '../../errors';
import { scheduleOf } from '../../recurring/schedules';
import { jsonArgument } from './jsonArgument';

/** The error this runtime gives parsing a stored schedule's cron in its zone, or null: it parses. */
function unparsable(cron: string, timeZone: string): string | null {
  try {
    scheduleOf(cron, timeZone);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** `acta schedule add|list|pause|resume|trigger|remove` (client.schedules; docs/schedules.md). */
export function scheduleCommands(cli: Command, withClient: <T>(namespace: string, fn: (client: Client, db: Db) => Promise<T>) => Promise<T>): void {
  const schedule = cli.command('schedule').description('cron schedules of a namespace: add, list, pause, resume, trigger, remove');
  const ns = (c: Command) => c.option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default');
  const line = (s: ScheduleRecord) =>
    [s.name, s.definition, JSON.stringify(s.cron), s.timeZone, s.source, s.paused ? 'paused' : 'active',
     `next=${s.nextFireAt?.toISOString() ?? '-'}`, `last=${s.lastFireAt?.toISOString() ?? '-'}`, `outcome=${s.lastOutcome ?? '-'}`].join('\t');
  // Named with its namespace, as "no job 12 in namespace …" is (test/cliJson.test.ts).
  const notFound = (name: string, namespace: string) => {
    console.error(`acta: no schedule "${name}" in namespace "${namespace}"`);
    process.exitCode = 1;
  };

  ns(schedule.command('add <definition> <cron>').description('add (or change) a runtime schedule; its fires are jobs of <definition>'))
    .option('--name <name>', "the schedule's name (default: the definition's)")
    .option('--time-zone <zone>', 'IANA zone of the wall times', 'UTC')
    .option('--payload <json>', "the fires' payload (JSON)")
    .option('--catch-up <policy>', "missed fires: 'latest', 'all' or 'none'", 'latest')
    .option('--catch-up-window-ms <ms>', "with 'all': how far back", int(0))
    .option('--priority <n>', "each fire's priority, as enqueue's (default 0; higher is claimed first)", int(-INT4_MAX, INT4_MAX))
    .option('--concurrency-key <key>', "each fire's concurrency key (needed when <definition> has a concurrency limit)")
    .option('--rate-key <key>', "each fire's rate key (needed when <definition> has a rate limit)")
    .option('--lane <lane>', "each fire's lane (needed when <definition> has lanes)")
    .option('--force', 'add it even though no worker of the namespace has declared <definition> yet')
    .action(async (definition: string, cron: string, o: { namespace: string; name?: string; timeZone: string; payload?: string; catchUp: string; catchUpWindowMs?: number; priority?: number; concurrencyKey?: string; rateKey?: string; lane?: string; force?: boolean }) => {
      // In the command's own words what schedules.add would say in the API's.
      if (o.catchUpWindowMs !== undefined && o.catchUp !== 'all') throw new ConfigError("--catch-up-window-ms goes with --catch-up all");
      const spec = {
        name: o.name, cron, timeZone: o.timeZone, catchUp: o.catchUp as 'latest' | 'all' | 'none',
        ...(o.payload === undefined ? {} : { payload: jsonArgument('--payload', o.payload) }),
        ...(o.catchUpWindowMs === undefined ? {} : { catchUpWindowMs: o.catchUpWindowMs }),
        ...(o.priority === undefined ? {} : { priority: o.priority }),
        ...(o.concurrencyKey === undefined ? {} : { concurrencyKey: o.concurrencyKey }),
        ...(o.rateKey === undefined ? {} : { rateKey: o.rateKey }),
        ...(o.lane === undefined ? {} : { lane: o.lane }),
      };
      const added = await withClient(o.namespace, (c) => c.schedules.add(definition, spec, { force: o.force === true })).catch((err: unknown) => {
        const { missingKeys, unusedKeys } = err as { missingKeys?: string[]; unusedKeys?: string[] };
        const flags = (keys: string[]) => keys.map((k) => ({ concurrencyKey: '--concurrency-key', rateKey: '--rate-key', lane: '--lane' })[k] ?? k).join(', ');
        if (missingKeys) throw new ConfigError(`definition "${definition}" admits its jobs by ${missingKeys.join(', ')}: give ${flags(missingKeys)}`);
        if (unusedKeys) throw new ConfigError(`definition "${definition}" declares no policy for ${flags(unusedKeys)}: it would limit nothing of its own; leave it out`);
        throw err;
      });
      console.log(added);
    });
  ns(schedule.command('list [name]').description('schedules with their next fire, last fire and last outcome (tab-separated); exits 1 when the named one does not exist'))
    .option('--json', 'one JSON object per line (client.schedules.list\'s records)')
    .action(async (name: string | undefined, o: { namespace: string; json?: boolean }) => {
      const list = await withClient(o.namespace, (c) => c.schedules.list(name));
      if (name !== undefined && list.length === 0) notFound(name, o.namespace);
      for (const s of list) console.log(o.json ? JSON.stringify(s) : line(s));
      // A schedule with no next fire that this Node cannot parse: a worker on such a Node leaves it
      // unarmed (docs/schedules.md, "How a fire happens"). Said on stderr, the lines unchanged.
      for (const s of list) {
        const err = s.nextFireAt === null && !s.paused ? unparsable(s.cron, s.timeZone) : null;
        if (err !== null) console.error(`note: schedule ${JSON.stringify(s.name)} (cron ${JSON.stringify(s.cron)} in ${s.timeZone}) cannot be parsed by this Node: ${err}; a worker on such a Node leaves it unarmed and says so in a warn line`);
      }
    });
  // A no-op says so, exit 0, as `acta pause` ('already paused') and `acta resume` ('was not paused') do.
  const toggles = [
    ['pause', 'stop its fires (one paused already: says "already paused")', 'paused', 'already paused'],
    ['resume', 'fire again from the next instant (one not paused: says "was not paused")', 'resumed', 'was not paused'],
  ] as const;
  for (const [verb, what, done, same] of toggles) {
    ns(schedule.command(`${verb} <name>`).description(what)).action(async (name: string, o: { namespace: string }) => {
      const answer = await withClient(o.namespace, (_c, db) => setPausedAnswer(db, o.namespace, name, verb === 'pause'));
      if (answer === null) notFound(name, o.namespace);
      else console.log(`${answer === 'same' ? same : done}: ${name}`);
    });
  }
  ns(schedule.command('remove <name>').description('remove a runtime schedule')).action(async (name: string, o: { namespace: string }) => {
    if (!(await withClient(o.namespace, (c) => c.schedules.remove(name)))) notFound(name, o.namespace);
    else console.log(`removed: ${name}`);
  });
  ns(schedule.command('trigger <name>').description('a fire now, besides the schedule; prints its job id')).action(async (name: string, o: { namespace: string }) => {
    const id = await withClient(o.namespace, (c) => c.schedules.trigger(name));
    if (id === null) notFound(name, o.namespace);
    else console.log(id);
  });
}
