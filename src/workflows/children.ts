/*
 * Child jobs as a parent spawns them (ctx.spawn, ctx.spawnMany): their enqueue rows and options
 * (docs/workflows.md). The parent's counter and its wake are the database's (acta.spawn_children,
 * acta.tell_parents); the rules of the calls are src/workflows/workflow.ts'.
 */
import { intOption, knownKeys, MAX_NAME_BYTES, nameOption, runAtOption } from '../config';
import type { EnqueueRows } from '../db/jobs';
import { INT4_MAX } from '../db/types';
import { type Definition, type ItemOf, policyKeys } from '../definition';
import { ConfigError } from '../errors';
import { toJsonText } from '../json';

/** What a parent does when this child fails for good, is cancelled or is deleted. */
export type OnChildFailure = 'report' | 'fail-parent';

/**
 * Options of one child: as enqueue's. Its keys: each given one wins, else the definition's functions
 * compute it from the payload when the worker has the definition (given as the object, or one it
 * runs); a child named by a definition the worker does not have is checked by the enqueue's Rule.
 */
export interface ChildOptions {
  /** 'report' (default): waitForChildren returns the child's outcome; 'fail-parent': it throws ChildFailedError (the parent fails without retry). */
  onChildFailure?: OnChildFailure;
  priority?: number;
  runAt?: Date;
  maxAttempts?: number;
  /** A key naming an existing job gives that job's id; it is then not a child (not waited for). */
  idempotencyKey?: string;
  concurrencyKey?: string;
  rateKey?: string;
  lane?: string;
  /**
   * A child of a definition the worker does not have, that no worker has declared in the
   * namespace or that lacks a key its declared policy needs, is refused (EnqueueRefusedError), as
   * client.enqueue refuses it by name; true: spawned anyway (a definition whose worker has not
   * started yet).
   */
  force?: boolean;
}

/** One element of spawnMany: a child and its options. */
export interface SpawnItem<P = unknown> extends ChildOptions {
  /** The definition's name, or the definition itself (its `name` is used, and its key functions). */
  definition: string | Definition<any, any>;
  payload: P;
}

/** A spawnMany element whose `definition` is `D`, its payload checked against `PayloadOf<D>` (ItemOf, as client.enqueueMany's). */
export type SpawnItemOf<D> = ItemOf<SpawnItem, D>;

const ITEM_KEYS = ['definition', 'payload', 'onChildFailure', 'priority', 'runAt', 'maxAttempts', 'idempotencyKey', 'concurrencyKey', 'rateKey', 'lane', 'force'];

/** What spawnRows reads of a child: its definition's name, or an object with the name and the key functions. */
type ChildItem = ChildOptions & { definition: string | Pick<Definition, 'name' | 'concurrency' | 'rate' | 'lane'>; payload: unknown };

/** The definition a child names, when the spawning worker has it. */
export type KnownDefinition = (name: string) => Pick<Definition, 'name' | 'concurrency' | 'rate' | 'lane'> | undefined;

/**
 * The enqueue rows of `items` and whether each fails its parent. Keys are computed as an enqueue
 * computes them (policyKeys) with the child's definition: the object given, else `known(name)`; a
 * child without one is checked by acta.enqueue_jobs' Rule (rows.checks) unless forced.
 * ConfigError on a bad item.
 */
export function spawnRows(items: readonly ChildItem[], known: KnownDefinition = () => undefined): { rows: EnqueueRows; failParent: boolean[] } {
  const rows: Required<EnqueueRows> = { definitions: [], payloads: [], priorities: [], runAts: [], maxAttempts: [], idempotencyKeys: [], concurrencyKeys: [], rateKeys: [], lanes: [], checks: [] };
  const failParent: boolean[] = [];
  for (const item of items) {
    if (item === null || typeof item !== 'object') throw new ConfigError('a child is { definition, payload, ...options }');
    knownKeys('spawn option', item, ITEM_KEYS);
    const given = typeof item.definition === 'object' && item.definition !== null ? (item.definition as Pick<Definition, 'name' | 'concurrency' | 'rate' | 'lane'>) : undefined;
    const name = nameOption('definition', given ? given.name : item.definition, MAX_NAME_BYTES);
    rows.definitions.push(name);
    const definition = given ?? known(name);
    // As enqueue's (src/client/enqueueRows.ts): a key for a policy the definition does not have
    // would limit nothing, and count in another definition's limit of that key.
    if (definition && item.concurrencyKey !== undefined && !definition.concurrency) throw new ConfigError(`concurrencyKey: definition "${name}" has no concurrency policy`);
    if (definition && item.rateKey !== undefined && !definition.rate) throw new ConfigError(`rateKey: definition "${name}" has no rate policy`);
    rows.payloads.push(toJsonText(item.payload === undefined ? null : item.payload));
    if (item.priority !== undefined) intOption('priority', item.priority, -INT4_MAX, INT4_MAX);
    if (item.maxAttempts !== undefined) intOption('maxAttempts', item.maxAttempts, 1, INT4_MAX);
    if (item.runAt !== undefined) runAtOption(item.runAt);
    const policy = item.onChildFailure ?? 'report';
    if (policy !== 'report' && policy !== 'fail-parent') throw new ConfigError(`onChildFailure is 'report' or 'fail-parent', got ${String(policy)}`);
    if (item.force !== undefined && typeof item.force !== 'boolean') throw new ConfigError(`force must be a boolean, got ${typeof item.force}`);
    rows.priorities.push(item.priority ?? null);
    rows.runAts.push(item.runAt ?? null);
    rows.maxAttempts.push(item.maxAttempts ?? null);
    rows.idempotencyKeys.push(item.idempotencyKey === undefined ? null : nameOption('idempotencyKey', item.idempotencyKey, 2_000));
    const keys = policyKeys(definition, item.payload, item);
    rows.concurrencyKeys.push(keys.concurrencyKey);
    rows.rateKeys.push(keys.rateKey);
    rows.lanes.push(keys.lane);
    failParent.push(policy === 'fail-parent');
    rows.checks.push(definition === undefined && item.force !== true);
  }
  return { rows, failParent };
}
