/*
 * Child jobs as a parent spawns them (ctx.spawn, ctx.spawnMany): their enqueue rows and options
 * (docs/workflows.md). The parent's counter and its wake are the database's (acta.spawn_children,
 * acta.tell_parents); the rules of the calls are src/workflows/workflow.ts'.
 */
import { intOption, knownKeys, MAX_NAME_BYTES, nameOption } from '../config';
import type { EnqueueRows } from '../db/jobs';
import { INT4_MAX } from '../db/types';
import { ConfigError } from '../errors';
import { toJsonText } from '../json';

/** What a parent does when this child fails for good, is cancelled or is deleted. */
export type OnChildFailure = 'report' | 'fail-parent';

/** Options of one child: as enqueue's (its keys as given: a child's definition is not consulted). */
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
   * A child named by a string that no worker has declared in the namespace is refused
   * (EnqueueRefusedError), as client.enqueue refuses it by name; true: spawned anyway (a
   * definition whose worker has not started yet).
   */
  force?: boolean;
}

export interface SpawnItem extends ChildOptions {
  definition: string | { name: string };
  payload: unknown;
}

const ITEM_KEYS = ['definition', 'payload', 'onChildFailure', 'priority', 'runAt', 'maxAttempts', 'idempotencyKey', 'concurrencyKey', 'rateKey', 'lane', 'force'];

/**
 * The enqueue rows of `items`, whether each fails its parent, and whether its name is checked
 * against the namespace's declared definitions (named by a string, not forced: as client.enqueue
 * checks a name it has no definition of; src/workflows/workflow.ts applies it). ConfigError on a
 * bad item.
 */
export function spawnRows(items: readonly SpawnItem[]): { rows: EnqueueRows; failParent: boolean[]; checked: boolean[] } {
  const rows: Required<EnqueueRows> = { definitions: [], payloads: [], priorities: [], runAts: [], maxAttempts: [], idempotencyKeys: [], concurrencyKeys: [], rateKeys: [], lanes: [], checks: [] };
  const failParent: boolean[] = [];
  const checked: boolean[] = [];
  for (const item of items) {
    if (item === null || typeof item !== 'object') throw new ConfigError('a child is { definition, payload, ...options }');
    knownKeys('spawn option', item, ITEM_KEYS);
    const raw = typeof item.definition === 'object' && item.definition !== null ? item.definition.name : item.definition;
    rows.definitions.push(nameOption('definition', raw, MAX_NAME_BYTES));
    rows.payloads.push(toJsonText(item.payload === undefined ? null : item.payload));
    if (item.priority !== undefined) intOption('priority', item.priority, -INT4_MAX, INT4_MAX);
    if (item.maxAttempts !== undefined) intOption('maxAttempts', item.maxAttempts, 1, INT4_MAX);
    if (item.runAt !== undefined && !(item.runAt instanceof Date && Number.isFinite(item.runAt.getTime()))) throw new ConfigError('runAt must be a valid Date');
    const policy = item.onChildFailure ?? 'report';
    if (policy !== 'report' && policy !== 'fail-parent') throw new ConfigError(`onChildFailure is 'report' or 'fail-parent', got ${String(policy)}`);
    if (item.force !== undefined && typeof item.force !== 'boolean') throw new ConfigError(`force must be a boolean, got ${typeof item.force}`);
    rows.priorities.push(item.priority ?? null);
    rows.runAts.push(item.runAt ?? null);
    rows.maxAttempts.push(item.maxAttempts ?? null);
    rows.idempotencyKeys.push(item.idempotencyKey === undefined ? null : nameOption('idempotencyKey', item.idempotencyKey, 2_000));
    rows.concurrencyKeys.push(item.concurrencyKey === undefined ? null : nameOption('concurrencyKey', item.concurrencyKey, 1_000));
    rows.rateKeys.push(item.rateKey === undefined ? null : nameOption('rateKey', item.rateKey, 1_000));
    rows.lanes.push(item.lane === undefined ? null : nameOption('lane', item.lane, 1_000));
    failParent.push(policy === 'fail-parent');
    checked.push(typeof item.definition === 'string' && item.force !== true);
  }
  return { rows, failParent, checked };
}
