import type { Db, Queryable } from './Db';

/** Events to publish, in parallel arrays (src/client/publish.ts checks them). */
export interface PublishRows {
  topics: string[];
  /** null: no key (no order with other events). */
  keys: (string | null)[];
  /** JSON texts, already checked by toJsonText. */
  messages: string[];
}

/** What one fan-out batch did: events taken (and deleted), jobs created. */
export interface FanOutBatch {
  events: number;
  jobs: number;
}

/**
 * acta.publish_events on `q` (a Db, or a caller's transaction: the events exist at its commit);
 * the events' ids in input order.
 */
export async function publishEvents(q: Queryable, namespace: string, rows: PublishRows): Promise<string[]> {
  const { rows: out } = await q.query<{ ids: string[] }>('select acta.publish_events($1, $2, $3, $4::jsonb)::text[] as ids', [
    namespace,
    rows.topics,
    rows.keys.every((k) => k === null) ? null : rows.keys,
    `[${rows.messages.join(',')}]`,
  ]);
  return out[0].ids;
}

/**
 * acta.fan_out_events in a transaction of its own under `SET LOCAL statement_timeout`
 * (`timeoutMs`): one batch of up to `limit` events. A batch past its timeout rolls back (SQLSTATE
 * 57014) and fans out nothing.
 */
export async function fanOutEvents(db: Db, args: { namespace: string; limit: number; timeoutMs: number }): Promise<FanOutBatch> {
  return db.transaction(async (tx) => {
    await tx.query(`select set_config('statement_timeout', $1, true)`, [`${args.timeoutMs}ms`]);
    const { rows } = await tx.query<FanOutBatch>('select events, jobs from acta.fan_out_events($1, $2)', [args.namespace, args.limit]);
    return rows[0];
  });
}
