/*
 * `acta job <id>`: the job as client.getJob reads it, as JSON; with --children or --signals, a page
 * of its child jobs or of the signals sent to it instead, read by the dashboard's job page's own
 * keyset queries (src/ops/dashboard/queries.ts), so both list alike (docs/operating.md).
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { MAX_NAME_BYTES } from '../../config';
import type { Client } from '../../client/client';
import type { Queryable } from '../../db/Db';
import { INT8_MAX } from '../../db/types';
import { ActaError } from '../../errors';
import { FAMILY_COUNT_CAP, FAMILY_PAGE, type FamilyPage, jobChildren, jobSignals } from '../dashboard/queries';
import { int, name } from './args';
import { formatTable } from './table';

type WithClient = <T>(namespace: string, fn: (client: Client, db: Queryable) => Promise<T>) => Promise<T>;

interface JobOpts {
  namespace: string;
  children?: boolean;
  signals?: boolean;
  limit?: number;
  cursor?: string;
  json?: boolean;
}

/** A cursor a page printed: a child job's or a signal's id (bigint). */
function cursor(value: string): string {
  if (!/^[0-9]{1,19}$/.test(value) || BigInt(value) > INT8_MAX) throw new InvalidArgumentError('must be the cursor the page before printed (an id).');
  return value;
}

const iso = (d: Date | null) => (d ? d.toISOString() : '');
/** A count that stopped at FAMILY_COUNT_CAP reads "≥", as on the dashboard. */
const counted = (n: number, one: string, many: string) => `${n >= FAMILY_COUNT_CAP ? '≥ ' : ''}${n} ${n === 1 ? one : many}`;

/** Prints a page: a table with `footer` under it, or --json one object per line; then the next page's cursor, as `acta jobs list` does. */
function printPage(page: FamilyPage<object>, json: boolean | undefined, table: () => string[][], footer: string): void {
  if (json) for (const row of page.rows) console.log(JSON.stringify(row));
  else console.log(`${formatTable(table(), { wholeLast: true })}\n${footer}`);
  if (page.nextCursor === null) return;
  console.log(json ? JSON.stringify({ nextCursor: page.nextCursor }) : `next page: --cursor ${page.nextCursor}`);
}

/** Registers `acta job <id> [--children | --signals [--limit n] [--cursor id]]` on `cli`. */
export function registerJobCommand(cli: Command, withClient: WithClient): void {
  cli
    .command('job <id>')
    .description(
      'print one job as JSON: status, payload, result, last error, attempts, its newest 100 finished attempts and their count (client.getJob); with --children or --signals, a page of its child jobs or of the signals sent to it instead (as its dashboard page lists them); exits 1 if the namespace has no such job',
    )
    .option('--namespace <name>', 'queue namespace', name(MAX_NAME_BYTES), 'default')
    .addOption(new Option('--children', 'its child jobs, in the order spawned, a page at a time').conflicts('signals'))
    .option('--signals', 'the signals sent to it, consumed or not, in the order sent, a page at a time (each payload cut to 2,048 characters)')
    .option('--limit <n>', `rows in the page (1-1000, default ${FAMILY_PAGE})`, int(1, 1_000))
    .option('--cursor <id>', 'start after this id (the next-page cursor the page before printed)', cursor)
    .option('--json', 'with --children or --signals: one JSON object per line')
    .action(async (id: string, o: JobOpts) => {
      const list = o.children ? 'children' : o.signals ? 'signals' : null;
      if (list === null && (o.limit !== undefined || o.cursor !== undefined)) throw new ActaError('ACTA_CLI_USAGE', 'job: --limit and --cursor page --children or --signals: give one of them');
      const { job, children, signals } = await withClient(o.namespace, async (client, db) => {
        // getJob checks the id (ConfigError) and finds it in the namespace, as the dashboard's jobDetail does before its lists.
        const job = await client.getJob(id);
        if (job === null || list === null) return { job };
        const after = o.cursor ?? null;
        return list === 'children' ? { job, children: await jobChildren(db, job.id, after, o.limit) } : { job, signals: await jobSignals(db, job.id, after, o.limit) };
      });
      if (job === null) throw new ActaError('ACTA_NO_SUCH_JOB', `no job ${id} in namespace "${o.namespace}"`);
      if (children) {
        printPage(
          children,
          o.json,
          () => [['ID', 'DEFINITION', 'STATUS', 'CREATED', 'FINISHED', 'ERROR'], ...children.rows.map((c) => [c.id, c.definition, c.failParent ? `${c.status} (fails its parent)` : c.status, iso(c.createdAt), iso(c.finishedAt), c.errorMessage ?? ''])],
          `${counted(children.total, 'child job', 'child jobs')}, in the order spawned (a deleted child is not listed)`,
        );
      } else if (signals) {
        // An unconsumed signal of a job that has ended stays so: no wait will take it (as on the dashboard).
        const unconsumed = ['succeeded', 'failed', 'cancelled'].includes(job.status) ? 'not consumed' : 'pending';
        printPage(
          signals,
          o.json,
          () => [
            ['ID', 'SIGNAL', 'SENT', 'CONSUMED', 'IDEMPOTENCY KEY', 'PAYLOAD'],
            ...signals.rows.map((s) => [s.id, s.name, iso(s.sentAt), s.consumedAt ? `${iso(s.consumedAt)} (${s.consumedStep})` : unconsumed, s.idempotencyKey ?? '', s.payload ? `${s.payload.text}${s.payload.truncated ? ` … (cut; ${s.payload.bytes} bytes)` : ''}` : '']),
          ],
          `${counted(signals.total, 'signal', 'signals')}, ${counted(signals.pending, unconsumed, unconsumed)}, in the order sent`,
        );
      } else console.log(JSON.stringify(job, null, 2));
    });
}
