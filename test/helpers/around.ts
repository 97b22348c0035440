import type { Db } from '../../src/db/Db';

/** One statement about to run: its text, and `run`, which sends it to the wrapped Db. */
export type Around = <R>(text: string, params: unknown[] | undefined, run: () => Promise<{ rows: R[] }>) => Promise<{ rows: R[] }>;

/**
 * `inner` with every statement it runs, plain (`query`) or named (`prepared`: the worker's claim
 * and completion calls), passed through `around`: for tests that delay, fail or watch statements.
 */
export function aroundStatements(inner: Db, around: Around): Db {
  return {
    ...inner,
    query: <R>(text: string, params?: unknown[]) => around<R>(text, params, () => inner.query<R>(text, params)),
    prepared: inner.prepared && (<R>(name: string, text: string, params: unknown[]) => around<R>(text, params, () => inner.prepared!<R>(name, text, params))),
  };
}
