/*
 * client.retryJobs, cancelJobs and deleteJobs (docs/operating.md, "Admin operations"): given ids or
 * a filter's jobs, one statement per bounded batch, each its own transaction.
 */
import { knownKeys, MAX_NAME_BYTES, nameOption } from '../config';
import type { Db } from '../db/Db';
import { INT8_MAX, type JobId, type JobStatus } from '../db/types';
import { ConfigError } from '../errors';
import type { Admin, AdminContext } from './admin';
import { jobIdText } from './jobId';
import { FILTER_KEYS, filterParams, type JobFilter, pickSql } from './listJobs';

/** Rows one statement of a bulk retry, cancel or delete takes (each batch its own transaction). */
export const ADMIN_BATCH = 500;

/**
 * The jobs a retry, cancel or delete acts on: these ids, or every job matching a filter. A filter
 * that names nothing but the namespace selects every job of it: refused (ConfigError) unless it
 * says `all: true`, as `acta jobs` refuses it without a filter option.
 */
export type JobSelection = { ids: (JobId | number | bigint)[]; namespace?: string } | (JobFilter & { all?: boolean });

/** The bulk operations (Admin.retryJobs, cancelJobs, deleteJobs) of a client of `context.namespace`. */
export function bulkOperations(context: AdminContext): Pick<Admin, 'retryJobs' | 'cancelJobs' | 'deleteJobs'> {
  const { dbOf, run } = context;
  return {
    retryJobs: (selection) =>
      inBatches('retryJobs', dbOf('retryJobs'), selection, context.namespace, ['failed'], ['failed', 'cancelled'], run, (picked) => ({
        // The retry, and the recorded waits it makes happen anew: acta.retry_jobs (sql/functions/retry_jobs.sql).
        ctes: `, done as materialized (select unnest(acta.retry_jobs($1, array(select p.id from ${picked} p))) as id)`,
        select: `array(select d.id::text from done d order by d.id desc) as ids, null::text[] as requested`,
      })).then((r) => r.ids),
    cancelJobs: async (selection) => {
      const r = await inBatches('cancelJobs', dbOf('cancelJobs'), selection, context.namespace, ['ready', 'waiting', 'executing'], ['ready', 'waiting', 'executing'], run, (picked) => ({
        ctes: `, done as materialized (select p.id, acta.cancel_job($1, p.id) as answer from ${picked} p)`,
        select: `array(select d.id::text from done d where d.answer = 'cancelled' order by d.id desc) as ids,
                 array(select d.id::text from done d where d.answer = 'requested' order by d.id desc) as requested`,
      }));
      return { cancelled: r.ids, requested: r.requested };
    },
    deleteJobs: (selection) =>
      inBatches('deleteJobs', dbOf('deleteJobs'), selection, context.namespace, ['succeeded', 'failed', 'cancelled'], ['succeeded', 'failed', 'cancelled'], run, (picked) => ({
        // Finished rows, locked (in acta.jobs or acta.succeeded_jobs: a lock cannot be taken through
        // their union), then deleted with all that refers to them by the one deleter (acta.delete_jobs).
        ctes: `, kept as materialized (
           select j.id from acta.jobs j where j.id = any (array(select p.id from ${picked} p)) and j.status in ('succeeded', 'failed', 'cancelled')
           for update
         ),
         moved as materialized (
           select s.id from acta.succeeded_jobs s where s.id = any (array(select p.id from ${picked} p))
           for update
         ),
         done as materialized (select k.id from kept k union all select m.id from moved m),
         deleted as materialized (select acta.delete_jobs(array(select d.id from done d)) as n)`,
        select: `array(select d.id::text from done d, deleted order by d.id desc) as ids, null::text[] as requested`,
      })).then((r) => r.ids),
  };
}

/** The filter fields that narrow a bulk selection below the whole namespace (all but `namespace`). */
const NARROWING_KEYS = FILTER_KEYS.filter((k) => k !== 'namespace');

/**
 * A bulk operation (`what`: its name, for errors): the selection's jobs in batches of ADMIN_BATCH,
 * each one statement (`body` follows a `picked` CTE of the batch's ids and answers `ids`,
 * `requested`), until a batch picks fewer than a batch. Ids given: those of the namespace, in
 * batches likewise. A filter that narrows nothing needs `all: true` (test/db/admin.test.ts).
 */
async function inBatches(
  what: string,
  db: Db,
  selection: JobSelection,
  namespace: string,
  byDefault: readonly JobStatus[],
  allowed: readonly JobStatus[],
  run: <T>(fn: () => Promise<T>) => Promise<T>,
  body: (picked: string) => { ctes: string; select: string },
): Promise<{ ids: string[]; requested: string[] }> {
  if (selection === null || typeof selection !== 'object') throw new ConfigError('a selection is { ids } or a filter');
  const out = { ids: [] as string[], requested: [] as string[] };
  const b = body('picked');
  if ('ids' in selection) {
    knownKeys('selection', selection, ['ids', 'namespace']);
    if (!Array.isArray(selection.ids)) throw new ConfigError('ids must be an array of job ids');
    // As every client call reads an id (jobIdText): leading zeros are the job, beyond bigint no job's.
    const ids = selection.ids.map((id) => jobIdText(id)).filter((id): id is string => id !== null);
    const ns = selection.namespace === undefined ? namespace : nameOption('namespace', selection.namespace, MAX_NAME_BYTES);
    for (let i = 0; i < ids.length; i += ADMIN_BATCH) {
      const batch = ids.slice(i, i + ADMIN_BATCH);
      const { rows } = await run(() =>
        db.query<{ ids: string[]; requested: string[] | null }>(
          `with picked as materialized (select j.id from acta.all_jobs j where j.id = any ($2::bigint[]) and j.namespace = $1 and j.status = any ($3::text[]))${b.ctes} select ${b.select}`,
          [ns, batch, allowed],
        ),
      );
      out.ids.push(...rows[0].ids);
      out.requested.push(...(rows[0].requested ?? []));
    }
    return out;
  }
  knownKeys('filter', selection, [...FILTER_KEYS, 'all']);
  const { all, ...filter } = selection as JobFilter & { all?: unknown };
  if (all !== undefined && typeof all !== 'boolean') throw new ConfigError(`${what}: all must be a boolean, got ${JSON.stringify(String(all)).slice(0, 80)}`);
  // Every job of the namespace is a selection to state, not one to fall into with `{}` (or a
  // filter whose fields are all undefined): the CLI refuses it likewise (src/ops/cli/admin.ts).
  const params = filterParams(filter, namespace, allowed, byDefault);
  if (all !== true && !NARROWING_KEYS.some((k) => (filter as Record<string, unknown>)[k] !== undefined)) {
    throw new ConfigError(`${what}: this selection names no ids and no filter, so it is every job of namespace "${params[0] as string}": give { ids }, a filter (status, definition, concurrencyKey, lane, createdAfter, ...), or { all: true } to mean every job`);
  }
  let below = INT8_MAX.toString();
  for (;;) {
    const { rows } = await run(() =>
      db.query<{ ids: string[]; requested: string[] | null; last: string | null; n: string }>(
        `with picked as materialized (${pickSql('j.id')})${b.ctes}
         select ${b.select}, (select min(p.id)::text from picked p) as last, (select count(*) from picked) as n`,
        [...params, below, ADMIN_BATCH],
      ),
    );
    out.ids.push(...rows[0].ids);
    out.requested.push(...(rows[0].requested ?? []));
    if (Number(rows[0].n) < ADMIN_BATCH || rows[0].last === null) return out;
    below = rows[0].last;
  }
}
