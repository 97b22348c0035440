import type { Logger } from 'pino';
import type { AppliedPolicy } from '../db/workers';
import type { Ledger } from '../ledger';
import type { Definition } from '../definition';

/**
 * A worker's view of its definitions' policies as the namespace applies them (docs/DESIGN.md,
 * "Policies": stored per namespace with a version; acta.refresh_definitions decides which
 * declaration applies). `definitions` is what the executors run: each of the worker's own
 * definitions (its handler and key functions) with the timeout, attempts and backoff that apply.
 * `load()` reads them (one statement); `versionSeen(v)`, called with each heartbeat's policy
 * version, reloads when it moved. A failed load is logged and tried again at the next beat; until
 * one succeeds the worker runs its own declarations.
 */
export interface Policies {
  readonly definitions: ReadonlyMap<string, Definition>;
  load(): Promise<void>;
  versionSeen(version: number | undefined): void;
}

/**
 * `own` with the applied policy's timeout, attempts and backoff. An applied backoff that is a
 * function (the newest build's own code) is this worker's own backoff.
 */
export function appliedDefinition(own: Definition, applied: AppliedPolicy): Definition {
  const backoff = applied.backoff === null ? undefined : applied.backoff === 'function' ? own.backoff : applied.backoff;
  return { ...own, timeoutMs: applied.timeoutMs ?? undefined, maxAttempts: applied.maxAttempts ?? undefined, backoff };
}

export function createPolicies(options: { ledger: Pick<Ledger, 'loadPolicies'>; namespace: string; definitions: ReadonlyMap<string, Definition>; logger: Logger }): Policies {
  const { ledger, namespace, logger } = options;
  const own = options.definitions;
  const definitions = new Map(own);
  const names = [...own.keys()];
  let version: number | undefined;
  let loading: Promise<void> | undefined;
  const load = (): Promise<void> =>
    (loading ??= ledger.loadPolicies(namespace, names)
      .then((answer) => {
        for (const applied of answer.policies) {
          const mine = own.get(applied.name);
          if (mine) definitions.set(applied.name, appliedDefinition(mine, applied));
        }
        if (version !== undefined) logger.info({ policyVersion: answer.version, was: version }, 'definition policies reloaded');
        version = answer.version;
      })
      .finally(() => {
        loading = undefined;
      }));
  return {
    definitions,
    load,
    versionSeen(seen) {
      if (seen === undefined || seen === version || loading) return;
      load().catch((err: unknown) => logger.warn({ err }, 'could not reload the definition policies; trying again at the next heartbeat'));
    },
  };
}
