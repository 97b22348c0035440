/*
 * client.publish (docs/outbox.md): events written in the caller's transaction when given one, so
 * they exist at its commit and never after its rollback; sys.outbox fans each out to one job per
 * subscribed definition.
 */
import { knownKeys, MAX_NAME_BYTES, nameOption, optionsOf } from '../config';
import type { Queryable } from '../db/Db';
import { publishEvents, type PublishRows } from '../db/outbox';
import { ActaError, atItem, ConfigError } from '../errors';
import { toJsonText } from '../json';
import type { Ledger } from '../ledger';
import { MAX_EVENT_KEY_BYTES, MAX_EVENT_MESSAGE_BYTES } from '../recurring/outbox';

export interface PublishOptions {
  /** Publish inside the caller's transaction (a Queryable on which it ran BEGIN): the event exists at its commit, never after its rollback. */
  tx?: Queryable;
  /** Events of one key reach each subscriber one at a time, in publish order (docs/outbox.md). A non-empty string of at most 700 bytes in UTF-8; null: no key, as a received OutboxEvent's `key` says. */
  key?: string | null;
}

/** One element of publishMany. */
export interface PublishItem<M = unknown> {
  topic: string;
  message: M;
  /** As PublishOptions.key; null: no key. */
  key?: string | null;
}

/** What publish returns for each event. */
export interface PublishResult {
  /** The event's id (bigint as a decimal string): the `id` of its subscribers' OutboxEvent payloads. */
  id: string;
}

export function createPublish(deps: { ledger: Ledger; namespace: string; inTx: (tx: Queryable | undefined) => Queryable | undefined; verdict: (err: unknown, inTx: boolean) => Promise<unknown> }) {
  /** All checked first (ConfigError, InvalidJsonError: nothing written), then one statement. */
  const publishItems = async (items: readonly PublishItem[], tx: Queryable | undefined, many: boolean): Promise<PublishResult[]> => {
    const rows: PublishRows = { topics: [], keys: [], messages: [] };
    items.forEach((item, i) => {
      try {
        if (item === null || typeof item !== 'object') throw new ConfigError(`a publishMany item is an object { topic, message, key? }, got ${item === null ? 'null' : typeof item}`);
        knownKeys('publish item field', item, ['topic', 'message', 'key']);
        rows.topics.push(nameOption('topic', item.topic, MAX_NAME_BYTES));
        rows.keys.push(item.key === undefined || item.key === null ? null : nameOption('key', item.key, MAX_EVENT_KEY_BYTES));
        rows.messages.push(toJsonText(item.message, MAX_EVENT_MESSAGE_BYTES, 'an event message may hold (docs/outbox.md)'));
      } catch (err) {
        throw many && err instanceof ActaError ? atItem(err, i, 'publishMany') : err;
      }
    });
    if (rows.topics.length === 0) return [];
    const q = deps.inTx(tx);
    try {
      const ids = q ? await publishEvents(q, deps.namespace, rows) : await deps.ledger.publishEvents(deps.namespace, rows);
      return ids.map((id) => ({ id }));
    } catch (err) {
      throw await deps.verdict(err, q !== undefined);
    }
  };
  return {
    async publish(topic: string, message: unknown, options?: PublishOptions | null): Promise<PublishResult> {
      knownKeys('publish option', optionsOf('publish', options), ['tx', 'key']);
      const [result] = await publishItems([{ topic, message, ...(options?.key == null ? {} : { key: options.key }) }], options?.tx ?? undefined, false);
      return result;
    },
    // async: a refusal rejects, as enqueueMany's does, never throws at the call.
    async publishMany(items: readonly PublishItem[], options?: { tx?: Queryable } | null): Promise<PublishResult[]> {
      knownKeys('publishMany option', optionsOf('publishMany', options), ['tx']);
      if (!Array.isArray(items)) throw new ConfigError('publishMany takes an array of { topic, message, key? }');
      return publishItems(items, options?.tx ?? undefined, true);
    },
  };
}
