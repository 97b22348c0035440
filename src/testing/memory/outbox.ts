/*
 * The outbox (sql/functions/publish_events.sql, fan_out_events.sql; docs/outbox.md) in memory.
 * Calls are applied one at a time, whole, so the fan-out's namespace lock has nothing to order.
 */
import type { FanOutBatch, PublishRows } from '../../db/outbox';
import { OUTBOX_NAME } from '../../recurring/outbox';
import { enqueueJobs } from './jobs';
import { parseJsonb, type Store, type Tx } from './state';

/** acta.publish_events: one event per element, ids in input order; a message jsonb refuses writes nothing. */
export function publishEvents(store: Store, tx: Tx, namespace: string, rows: PublishRows): string[] {
  const messages = parseJsonb(`[${rows.messages.join(',')}]`) as unknown[];
  const ids = rows.topics.map((topic, i) => {
    const id = store.nextEventId();
    store.events.push({ id, namespace, topic, key: rows.keys[i] ?? null, message: messages[i], publishedAt: tx.now });
    return id;
  });
  tx.notify(`outbox:${namespace}`);
  return ids.map(String);
}

/**
 * acta.fan_out_events: the namespace's oldest `limit` events, each one job per definition whose
 * applied policy subscribes to its topic (in (event id, definition) order, through the enqueue's
 * own rule: idempotency key, lane, keys), then deleted; none while the namespace's sys.outbox is paused.
 */
export function fanOutEvents(store: Store, tx: Tx, args: { namespace: string; limit: number }): FanOutBatch {
  if (store.schedule(args.namespace, OUTBOX_NAME)?.paused) return { events: 0, jobs: 0 };
  const taken = store.events.filter((e) => e.namespace === args.namespace).slice(0, args.limit);
  if (taken.length === 0) return { events: 0, jobs: 0 };
  const subscribers = [...store.allDefinitions()]
    .filter((d) => d.namespace === args.namespace && Array.isArray(d.policy?.subscribe))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const pairs = taken.flatMap((e) => subscribers.filter((d) => d.policy?.subscribe?.includes(e.topic)).map((d) => ({ e, d })));
  if (pairs.length > 0) {
    enqueueJobs(store, tx, args.namespace, {
      definitions: pairs.map(({ d }) => d.name),
      payloads: pairs.map(({ e }) => JSON.stringify({ id: String(e.id), topic: e.topic, key: e.key, message: e.message, publishedAt: new Date(e.publishedAt).toISOString() })),
      priorities: pairs.map(() => null),
      runAts: pairs.map(() => null),
      maxAttempts: pairs.map(() => null),
      idempotencyKeys: pairs.map(({ e, d }) => `acta:outbox:${String(e.id).padStart(19, '0')}:${d.name}`),
      concurrencyKeys: pairs.map(({ d }) => (d.policy?.concurrency ? d.name : null)),
      rateKeys: pairs.map(({ d }) => (d.policy?.rate ? d.name : null)),
      lanes: pairs.map(({ e, d }) => (e.key === null ? null : `acta:outbox:${Buffer.byteLength(d.name)}:${d.name}:${e.key}`)),
    });
  }
  const gone = new Set(taken);
  store.events = store.events.filter((e) => !gone.has(e));
  return { events: taken.length, jobs: pairs.length };
}
