import { intOption, knownKeys, MAX_IDEMPOTENCY_KEY_BYTES, MAX_NAME_BYTES, nameOption, runAtOption } from '../config';
import type { EnqueueRows } from '../db/jobs';
import { INT4_MAX } from '../db/types';
import { type Definition, policyKeys } from '../definition';
import { ActaError, atItem, ConfigError, UnknownDefinitionError } from '../errors';
import { toJsonText } from '../json';
import type { ClientOptions, EnqueueItem } from './client';
import { shown } from './jobId';

/** The keys an EnqueueItem may have; `tx` goes in enqueueMany's second argument. */
export const ITEM_KEYS = ['definition', 'payload', 'runAt', 'priority', 'maxAttempts', 'idempotencyKey', 'concurrencyKey', 'rateKey', 'lane', 'force'];
export const TX_HINT = "; tx is enqueue's option, and enqueueMany's second argument: enqueueMany(items, { tx })";
/** enqueue's options: an item's keys but its definition and payload, which are enqueue's arguments, and `tx`. */
export const ENQUEUE_OPTION_KEYS = [...ITEM_KEYS.filter((k) => k !== 'definition' && k !== 'payload'), 'tx'];

/**
 * The name an enqueue item names: a string as it is, a definition (an object with a `handler`
 * function, as defineJob makes it) by its `name`. Throws ConfigError for anything else: a function
 * or a class would otherwise be enqueued under its own JavaScript name (test/db/enqueue.test.ts,
 * "enqueue and enqueueMany take the definition itself").
 */
function definitionName(definition: unknown): unknown {
  if (typeof definition === 'string') return definition;
  const d = definition as { name?: unknown; handler?: unknown } | null;
  if (d !== null && typeof d === 'object' && !Array.isArray(d) && typeof d.handler === 'function') return d.name;
  const got = typeof definition === 'function' ? `a function (${(definition as { name: string }).name || 'anonymous'})` : (JSON.stringify(definition) ?? String(definition)).slice(0, 80);
  throw new ConfigError(`definition must be a definition's name or the definition itself (defineJob: an object with a name and a handler), got ${got}`);
}

/**
 * An enqueue's items checked and turned into the statement's columns (acta.enqueue_jobs), nothing
 * written: each item's keys, name, policy keys and options, its payload as JSON text. `known`: the
 * client's definitions (a name outside them is UnknownDefinitionError); `force`: the client's. With
 * `many` (enqueueMany) an error names its item (atItem). Throws ConfigError, InvalidJsonError.
 */
export function enqueueRows(items: readonly EnqueueItem[], context: { known: ReadonlyMap<string, NonNullable<ClientOptions['definitions']>[number]> | undefined; force: boolean; many: boolean }): EnqueueRows {
  const { known, many } = context;
  const rows = {
    definitions: [] as string[],
    payloads: [] as string[],
    priorities: [] as (number | null)[],
    runAts: [] as (Date | null)[],
    maxAttempts: [] as (number | null)[],
    idempotencyKeys: [] as (string | null)[],
    concurrencyKeys: [] as (string | null)[],
    rateKeys: [] as (string | null)[],
    lanes: [] as (string | null)[],
    checks: [] as boolean[],
  };
  /** The name the item before had, checked already: a batch of one definition checks it once. */
  let checkedName: string | undefined;
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    try {
      if (item === null || typeof item !== 'object') throw new ConfigError(`an enqueueMany item is an object { definition, payload, ...options }, got ${item === null ? 'null' : typeof item}`);
      // A misspelt option (e.g. `delayMs`, or `tx` on an item) would otherwise be ignored silently.
      knownKeys('enqueue option', item, ITEM_KEYS, TX_HINT);
      const rawName = definitionName(item.definition);
      const name = checkedName !== undefined && rawName === checkedName ? checkedName : nameOption('definition', rawName, MAX_NAME_BYTES);
      checkedName = name;
      const definition = known?.get(name);
      if (known && !definition) throw new UnknownDefinitionError(name, [...known.keys()].sort());
      // The keys: given, else computed by the definition at hand (the item's own, else the client's).
      const given = typeof item.definition === 'object' ? (item.definition as Definition) : definition;
      // A key for a policy the definition does not have would limit nothing: refused.
      if (given && item.concurrencyKey !== undefined && !given.concurrency) throw new ConfigError(`concurrencyKey: definition "${name}" has no concurrency policy`);
      if (given && item.rateKey !== undefined && !given.rate) throw new ConfigError(`rateKey: definition "${name}" has no rate policy`);
      if (item.force !== undefined && typeof item.force !== 'boolean') throw new ConfigError(`force must be a boolean, got ${shown(item.force)}`);
      // Both are PostgreSQL integer columns: out of int4 range would fail the whole statement.
      if (item.priority !== undefined) intOption('priority', item.priority, -INT4_MAX, INT4_MAX);
      if (item.maxAttempts !== undefined) intOption('maxAttempts', item.maxAttempts, 1, INT4_MAX);
      // PostgreSQL text stores a lone surrogate as U+FFFD: two different keys would become one,
      // and the second job would be dropped as a duplicate.
      // A btree entry holds at most 2,704 bytes (PostgreSQL, "B-Tree" limits), the namespace
      // included: a longer key would fail the insert with 54000 (test/db/enqueue.test.ts, "bad
      // options are refused with ConfigError before anything is written").
      if (item.idempotencyKey !== undefined) nameOption('idempotencyKey', item.idempotencyKey, MAX_IDEMPOTENCY_KEY_BYTES);
      if (item.runAt !== undefined) runAtOption(item.runAt);
      rows.definitions.push(name);
      rows.payloads.push(toJsonText(item.payload));
      rows.priorities.push(item.priority ?? null);
      rows.runAts.push(item.runAt ?? null);
      rows.maxAttempts.push(item.maxAttempts ?? null);
      rows.idempotencyKeys.push(item.idempotencyKey ?? null);
      const keys = policyKeys(given, item.payload, item);
      rows.concurrencyKeys.push(keys.concurrencyKey);
      rows.rateKeys.push(keys.rateKey);
      rows.lanes.push(keys.lane);
      // A job by name, of a definition this client does not have: the stored definitions decide
      // (src/policies/enqueueRule.ts), unless forced.
      rows.checks.push(given === undefined && !(item.force ?? context.force));
    } catch (err) {
      // enqueueMany names the item, also in a batch of one (test/db/enqueue.test.ts, "enqueueMany
      // names the item its error is about").
      throw many && err instanceof ActaError ? atItem(err, i) : err;
    }
  }
  return rows;
}
