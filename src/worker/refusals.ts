/**
 * A handler's call that ctx refuses, by the call itself: a bad option, name, payload or value
 * (a ConfigError or InvalidJsonError thrown by ctx.step's, ctx.spawn's, ctx.waitForSignal's,
 * ctx.rateLimited's, ctx.progress's own checks). The same call on any later attempt is refused the
 * same way, so a job whose handler lets such an error through fails without retry
 * (src/worker/executor.ts; docs/reference.md, "What ends an attempt";
 * test/testing/runAttempt.spec.ts, "a call ctx refuses"). Only ctx's own refusals are marked: the
 * same errors thrown by the handler's other code (its client's calls, a step's `fn`) are retried
 * as any error is.
 */
import { ConfigError, InvalidJsonError } from '../errors';

/** The errors ctx's calls threw refusing the call (weakly held: an error the handler dropped is not kept). */
const refused = new WeakSet<object>();

/** Marks `err` as ctx's refusal when it is a ConfigError or InvalidJsonError; returns it, to be thrown. */
export function refusedCall<E>(err: E): E {
  try {
    if (err instanceof ConfigError || err instanceof InvalidJsonError) refused.add(err);
  } catch {
    /* a Proxy whose getPrototypeOf trap throws: not acta's */
  }
  return err;
}

/** Whether `err` is a refusal ctx threw (refusedCall). */
export const isRefusedCall = (err: unknown): boolean => typeof err === 'object' && err !== null && refused.has(err);
