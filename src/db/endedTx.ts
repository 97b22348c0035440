import { ConfigError } from '../errors';
import type { Queryable } from './Db';

/**
 * The `tx` a Db's transaction(fn) hands `fn`: `inner` until the transaction ends, then a `query`
 * that rejects with ConfigError and sends nothing. On a server the transaction's connection goes
 * back to the pool at its end, where another caller may hold it in a transaction of its own: a
 * statement sent on a `tx` kept past its end (an enqueue not awaited in `fn`, a tx captured for
 * later) ran outside the caller's transaction, or inside that other one and was lost with its
 * rollback (test/db/enqueue.test.ts, "a tx used after its db.transaction ended"). PGlite's and an
 * embedded folder's follower's transactions end theirs alike (test/pglite.test.ts,
 * test/embeddedShare.test.ts), where their own errors were plain ones. Everything but
 * `query` is the inner object's own (a pg client's other methods stay usable).
 */
export function endingTx<T extends Queryable>(inner: T): { tx: T; end: () => void } {
  let ended = false;
  const query = (...args: unknown[]) => {
    if (ended) return Promise.reject(new ConfigError('tx was used after its transaction ended (committed or rolled back): give a tx only inside its db.transaction callback, and await every call made with it there'));
    return (inner.query as (...a: unknown[]) => unknown).apply(inner, args);
  };
  const tx = new Proxy(inner, {
    get(target, prop) {
      if (prop === 'query') return query;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    tx,
    end: () => {
      ended = true;
    },
  };
}
