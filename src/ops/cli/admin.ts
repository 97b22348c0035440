/*
 * The operating commands (docs/operating.md, "Admin commands"): acta jobs list|retry|cancel|delete,
 * acta workers, acta namespaces, acta alerts, acta pause|resume, acta why. Each is a client operation
 * (src/client/admin.ts, src/ops/why.ts); human output is a table, `--json` one object per line.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import { int, name } from './args';
import type { Client } from '../../client/client';
import type { Queryable } from '../../db/Db';
import { unchangedJobs } from '../unchanged';
import type { JobSelection } from '../../client/bulkOperations';
import { DEFAULT_ALERTS } from '../../client/fleetReads';
import type { JobFilter } from '../../client/listJobs';
import { alertsNotes } from '../alertsNotes';
import type { JobStatus } from '../../db/types';
import { ActaError } from '../../errors';
import { assertPauseDeclared } from '../pauseCheck';
import { instantOption } from './instant';
import { formatTable } from './table';
import { attemptsCell } from '../attempts';

/** Runs `fn` with a client of `namespace` and its database (`db`: for what the client API does not read). */
type WithClient = <T>(namespace: string, fn: (client: Client, db: Queryable) => Promise<T>) => Promise<T>;

const STATUSES = ['ready', 'executing', 'waiting', 'succeeded', 'failed', 'cancelled'];

function statusList(value: string): JobStatus[] {
  const list = value.split(',').map((s) => s.trim());
  for (const s of list) if (!STATUSES.includes(s)) throw new InvalidArgumentError(`must be a comma-separated list of ${STATUSES.join(', ')}.`);
  return list as JobStatus[];
}
const positive = int(1, 1_000);

/** The filter options as commander hands them over: a JobFilter with its namespace defaulted and statuses always a list. */
type FilterOpts = Omit<JobFilter, 'namespace' | 'status'> & { namespace: string; status?: JobStatus[]; json?: boolean };

const withFilter = (cmd: Command): Command =>
  cmd
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--status <list>', `statuses, comma-separated (${STATUSES.join(', ')})`, statusList)
    .option('--definition <name>', 'only jobs of this definition')
    .option('--concurrency-key <key>', 'only jobs of this concurrency key')
    .option('--lane <key>', 'only jobs of this lane')
    .option('--created-after <iso>', 'created at or after', instantOption)
    .option('--created-before <iso>', 'created before', instantOption)
    .option('--finished-after <iso>', 'finished at or after', instantOption)
    .option('--finished-before <iso>', 'finished before', instantOption)
    .option('--json', 'one JSON object per line');

const filterOf = (o: FilterOpts): JobFilter => {
  const f: JobFilter = {};
  for (const k of ['status', 'definition', 'concurrencyKey', 'lane', 'createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'] as const) {
    if (o[k] !== undefined) (f as Record<string, unknown>)[k] = o[k];
  }
  return f;
};

/** `ids` given: those jobs; else the filter, which must say something (a bulk action on every job is not a default). */
const PAST = { retry: 'retried', cancel: 'cancelled', delete: 'deleted' } as const;

function selectionOf(ids: string[], o: FilterOpts, what: string): JobSelection {
  if (ids.length > 0) {
    if (Object.keys(filterOf(o)).length > 0) throw new ActaError('ACTA_CLI_USAGE', `${what}: give job ids or filter options, not both`);
    for (const id of ids) if (!/^[0-9]+$/.test(id)) throw new ActaError('ACTA_CLI_USAGE', `${what}: a job id is a positive integer, got ${JSON.stringify(id)}`);
    return { ids };
  }
  const f = filterOf(o);
  if (Object.keys(f).length === 0) throw new ActaError('ACTA_CLI_USAGE', `${what}: give job ids, or at least one filter option (--status, --definition, ...)`);
  return f;
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : '');
const ago = (ms: number | null) => (ms === null ? '' : ms < 1_000 ? `${ms} ms` : ms < 120_000 ? `${Math.round(ms / 1_000)} s` : `${Math.round(ms / 60_000)} min`);

function printRows(json: boolean | undefined, rows: object[], table: () => string[][], options?: { wholeLast?: boolean }): void {
  if (json) for (const r of rows) console.log(JSON.stringify(r));
  else console.log(formatTable(table(), options));
}

/**
 * An alert's detail as `key=value` pairs, the keys of its JSON (docs/alerts.md, "Rules"), an
 * instant as ISO 8601 in UTC: `ageMs=360006 oldestDueAt=2026-12-06T20:40:14.339Z`.
 */
function alertDetail(detail: Record<string, unknown> | null): string {
  if (detail === null) return '';
  return Object.entries(detail)
    .map(([k, v]) => {
      const at = k.endsWith('At') && typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? new Date(v).toISOString() : null;
      return `${k}=${at ?? (typeof v === 'string' ? v : JSON.stringify(v))}`;
    })
    .join(' ');
}

/** Registers the operating commands on `cli`. */
export function registerAdminCommands(cli: Command, withClient: WithClient): void {
  const jobs = cli.command('jobs').description('list, retry, cancel or delete jobs (docs/operating.md)');

  withFilter(jobs.command('list').description('list jobs newest first, a page at a time (--cursor: the cursor the page before printed)'))
    .option('--limit <n>', 'jobs in the page (1-1000, default 50)', positive)
    .option('--cursor <id>', 'start below this job id (the next-page cursor)')
    .action(async (o: FilterOpts & { limit?: number; cursor?: string }) => {
      const page = await withClient(o.namespace, (client) => client.listJobs({ ...filterOf(o), limit: o.limit, cursor: o.cursor }));
      printRows(o.json, page.jobs, () => [
        ['ID', 'DEFINITION', 'STATUS', 'ATTEMPTS', 'CREATED', 'FINISHED', 'KEY', 'LANE', 'ERROR'],
        ...page.jobs.map((j) => [j.id, j.definition, j.blockedBy ? `${j.status} (${j.blockedBy})` : j.status, attemptsCell(j), iso(j.createdAt), iso(j.finishedAt), j.concurrencyKey ?? '', j.lane ?? '', j.errorMessage ?? '']),
      ]);
      if (o.json) {
        if (page.nextCursor) console.log(JSON.stringify({ nextCursor: page.nextCursor }));
      } else if (page.nextCursor) console.log(`next page: --cursor ${page.nextCursor}`);
    });

  /**
   * An action on jobs by ids or a filter. Each id it did not change is named with why (exit 1), as
   * `acta cancel` does for one: the job's status and the rule, or no such job, read after the action
   * in one statement (src/ops/unchanged.ts): on stderr the first 20, the rest counted; with --json
   * every one, under `reasons` beside `unchanged` (test/adminCli.spec.ts, test/cliJson.test.ts).
   */
  const bulk = (name: 'retry' | 'cancel' | 'delete', description: string) =>
    withFilter(jobs.command(`${name} [ids...]`).description(description)).action(async (ids: string[], o: FilterOpts) => {
      const selection = selectionOf(ids, o, `jobs ${name}`);
      const { answer, reasons } = await withClient(o.namespace, async (client, db) => {
        const answer: Record<string, string[]> =
          name === 'retry' ? { retried: await client.retryJobs(selection) } : name === 'cancel' ? await client.cancelJobs(selection) : { deleted: await client.deleteJobs(selection) };
        const changed = new Set(Object.values(answer).flat());
        // The answer's ids are the database's (`01` is job 1).
        const unchanged = ids.filter((id) => !changed.has(BigInt(id).toString()));
        return { answer, reasons: await unchangedJobs(db, o.namespace, name, unchanged) };
      });
      if (o.json) console.log(JSON.stringify(ids.length > 0 ? { ...answer, unchanged: reasons.map((r) => r.id), reasons } : answer));
      else for (const [k, v] of Object.entries(answer)) console.log(`${k}: ${v.length}${v.length > 0 ? ` (${v.slice(0, 20).join(', ')}${v.length > 20 ? ', …' : ''})` : ''}`);
      for (const r of reasons.slice(0, 20)) console.error(`acta: jobs ${name}: ${r.message}`);
      if (reasons.length > 20) console.error(`acta: jobs ${name}: and ${reasons.length - 20} more not ${PAST[name]}`);
      if (reasons.length > 0) process.exitCode = 1;
    });
  bulk('retry', 'retry Failed jobs (Cancelled ones with --status cancelled): Ready and due now, attempts reset to 0, in batches of 500');
  bulk(
    'cancel',
    "cancel Ready and Waiting jobs at once and ask the workers of Executing ones (as acta cancel), in batches of 500; a parent's unfinished child jobs are cancelled with it (not listed)",
  );
  bulk('delete', 'delete finished jobs (Succeeded, Failed, Cancelled) with their steps, signals and attempts');

  cli
    .command('workers')
    .description('the workers of a namespace: alive, silent (listed alive, no beat for 7 heartbeats: gone), stopped or dead, build, definitions, and the jobs each holds')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--json', 'one JSON object per line')
    .action(async (o: { namespace: string; json?: boolean }) => {
      const workers = await withClient(o.namespace, (client) => client.listWorkers());
      printRows(o.json, workers, () => [
        ['ID', 'STATUS', 'HOST', 'PID', 'BUILD', 'LAST BEAT', 'HOLDS', 'DEFINITIONS'],
        // A worker listed alive but silent past 7 heartbeats is gone (WorkerInfo.silent; docs/operating.md, "Admin commands").
        ...workers.map((w) => [w.id, w.silent ? 'silent' : w.status, w.hostname, String(w.pid), w.build ?? '', `${ago(w.silentMs)} ago`, w.holds.length > 0 ? `${w.holds.length}: ${w.holds.slice(0, 5).join(', ')}` : '0', w.definitions.join(', ')]),
      ]);
    });

  cli
    .command('namespaces')
    .description("every namespace: jobs by status (each counted up to 100,000), how long the oldest due job a worker may claim has waited (OLDEST DUE), the same for the due jobs a pause holds (OLDEST PAUSED), pauses")
    .option('--json', 'one JSON object per line')
    .action(async (o: { json?: boolean }) => {
      const all = await withClient('default', (client) => client.namespaces());
      printRows(o.json, all, () => [
        // A paused definition's due jobs wait for its resume, not for a worker: their wait is
        // OLDEST PAUSED, not OLDEST DUE (NamespaceInfo.oldestPausedMs; test/adminTables.test.ts).
        ['NAMESPACE', ...STATUSES.map((s) => s.toUpperCase()), 'OLDEST DUE', 'OLDEST PAUSED', 'PAUSED'],
        ...all.map((n) => [n.name, ...STATUSES.map((s) => String(n.counts[s as JobStatus])), ago(n.oldestReadyMs), ago(n.oldestPausedMs), n.pauses.map((p) => p.definition ?? '(all)').join(', ')]),
      ]);
    });

  cli
    .command('alerts')
    .description('the alerts sys.alerts raised in a namespace (docs/alerts.md): rule, subject, open or resolved, when raised and resolved, the values when raised; open ones, most recent first')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--all', 'the resolved alerts still kept (a day by default) too, after the open ones')
    .option('--json', 'one JSON object per line (client.alerts)')
    .action(async (o: { namespace: string; all?: boolean; json?: boolean }) => {
      const { alerts, notes } = await withClient(o.namespace, async (client, db) => ({
        alerts: await client.alerts({ all: o.all === true }),
        notes: o.json ? [] : await alertsNotes(db, o.namespace),
      }));
      printRows(
        o.json,
        alerts,
        () => [
          ['RULE', 'SUBJECT', 'STATE', 'RAISED', 'RESOLVED', 'DETAIL'],
          ...alerts.map((a) => [a.rule, a.subject, a.resolvedAt === null ? 'open' : 'resolved', iso(a.raisedAt), iso(a.resolvedAt), alertDetail(a.detail)]),
        ],
        { wholeLast: true },
      );
      if (o.json) return;
      if (alerts.length >= DEFAULT_ALERTS) console.log(`the first ${DEFAULT_ALERTS} shown`);
      // An empty list also when nothing evaluates the rules, and open alerts no longer current when
      // nothing evaluates them any more: say so, as the dashboard's Alerts page (src/ops/alertsNotes.ts).
      for (const note of notes) console.log(`note: ${note}`);
    });

  cli
    .command('pause')
    .description(
      'stop the claims of a namespace (or one definition) fleet-wide within one wakeup; running jobs finish. Refuses a namespace where no worker has declared a definition, or a definition not declared in it (listing those declared); --force pauses it anyway',
    )
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--definition <name>', 'only this definition', name(MAX_NAME_BYTES))
    .option('--reason <text>', 'why (stored with who and when)')
    .option('--by <who>', 'who (default: user@host)')
    .option('--force', 'pause a namespace or definition no worker has declared yet (e.g. before its worker is first deployed)')
    .option('--json', 'print the pause as JSON')
    .action(async (o: { namespace: string; definition?: string; reason?: string; by?: string; force?: boolean; json?: boolean }) => {
      const p = await withClient(o.namespace, async (client, db) => {
        if (o.force !== true) await assertPauseDeclared(db, o.namespace, o.definition, 'cli');
        return client.pause({ definition: o.definition, reason: o.reason, by: o.by });
      });
      if (o.json) console.log(JSON.stringify(p));
      else console.log(`${p.created ? 'paused' : 'already paused'}: ${p.definition === null ? `namespace "${p.namespace}"` : `definition "${p.definition}" of "${p.namespace}"`} by ${p.pausedBy ?? '?'} since ${iso(p.pausedAt)}${p.reason ? ` (${p.reason})` : ''}`);
    });

  cli
    .command('resume')
    .description('lift the pause of a namespace (or one definition); its workers claim at once')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--definition <name>', 'only this definition')
    .option('--json', 'print {"resumed": true|false}')
    .action(async (o: { namespace: string; definition?: string; json?: boolean }) => {
      const resumed = await withClient(o.namespace, (client) => client.resume({ definition: o.definition }));
      if (o.json) console.log(JSON.stringify({ resumed }));
      else console.log(resumed ? 'resumed' : 'was not paused');
    });

  cli
    .command('why <id>')
    .description('why a job is not running (or where it is): each cause with its blocker; exits 1 if the namespace has no such job')
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .option('--json', 'print the answer as JSON')
    .action(async (id: string, o: { namespace: string; json?: boolean }) => {
      const answer = await withClient(o.namespace, (client) => client.why(id));
      if (answer === null) throw new ActaError('ACTA_NO_SUCH_JOB', `no job ${id} in namespace "${o.namespace}"`);
      if (o.json) console.log(JSON.stringify(answer));
      else {
        console.log(`job ${answer.id}: ${answer.status}`);
        for (const r of answer.reasons) console.log(`  ${r.cause}: ${r.message}`);
      }
    });
}
