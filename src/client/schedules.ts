import type { Db } from '../db/Db';
import { armSchedules, changeSchedulePaused, listSchedules, putRuntimeSchedule, removeSchedule, type ScheduleRecord, storedZones, triggerSchedule, unarmedSchedules } from '../db/schedules';
import { knownKeys, MAX_NAME_BYTES, nameOption } from '../config';
import { type Definition, policyKeys } from '../definition';
import { missingPolicyKeys, unusedPolicyKeys } from '../policies/enqueueRule';
import { ConfigError } from '../errors';
import { shown } from './jobId';
import { armInstants, checkScheduleSpec, schedulesAsStored, type ScheduleSpec } from '../recurring/schedules';

/**
 * Schedules at runtime (docs/schedules.md, "At runtime"), beside the ones declared in code. Names
 * are unique in the namespace; a declared schedule can be paused, resumed and triggered here, but
 * is changed or removed only in code (ConfigError). Each call arms what it leaves unarmed at once.
 */
export interface ClientSchedules {
  /**
   * Adds a schedule of `definition` (a name, or the definition itself), or changes the runtime one of
   * that name (its fire not claimed and not due yet re-armed; its fire started or due: that fire run
   * under the old spec, the new next instant armed at its end, docs/schedules.md "Changes"): 'added', 'changed' or 'same'. Its fires' policy keys
   * are the spec's, else the definition's functions on its payload when the client knows the
   * definition; by name, a definition stored with a concurrency limit, a rate or a lane needs them in
   * the spec, as an enqueue by name does. Throws ConfigError for a bad spec, a cron that never fires,
   * a key missing, a declared schedule's name, a name beginning `sys.` (acta's system schedules), or a definition that no worker of the namespace has
   * declared and the client does not define (its fires would never run), unless `force` (default:
   * the client's).
   */
  add(definition: string | Definition<any, any>, spec: ScheduleSpec, options?: { force?: boolean }): Promise<'added' | 'changed' | 'same'>;
  /** Every schedule of the namespace (or the one named), with its next fire, last fire and last outcome. */
  list(name?: string): Promise<ScheduleRecord[]>;
  /** Stops its fires (the unstarted armed one is deleted; one running finishes); false: no such schedule. */
  pause(name: string): Promise<boolean>;
  /** Fires again from the next instant after now (missed ones while paused are not caught up); false: no such schedule. */
  resume(name: string): Promise<boolean>;
  /** A fire now, besides its schedule (ctx.scheduledAt: now): its job id, or null (no such schedule). */
  trigger(name: string): Promise<string | null>;
  /** Removes a runtime schedule and its unstarted fire; false: no such schedule. ConfigError for a declared one. */
  remove(name: string): Promise<boolean>;
}

/**
 * A schedule name given to pause, resume, trigger, remove or list: a NUL failed as a raw database
 * error (22021), and a value that is no name answered "no such schedule" (test/db/badInput.test.ts).
 */
const scheduleName = (name: unknown): string => nameOption('schedule name', name, MAX_NAME_BYTES);

/** Arms the namespace's schedules that need a fire (each call of client.schedules leaves none unarmed). */
async function armNamespace(d: Db, namespace: string): Promise<void> {
  const { names, versions, instants } = armInstants(await unarmedSchedules(d, namespace));
  await armSchedules(d, namespace, names, versions, instants);
}

/**
 * schedules.pause and resume, saying whether it changed anything: 'changed', 'same' (paused, or
 * running, already), null (no such schedule). For `acta schedule pause|resume`, which says which.
 */
export async function setPausedAnswer(d: Db, namespace: string, name: string, paused: boolean): Promise<'changed' | 'same' | null> {
  const answer = await changeSchedulePaused(d, namespace, name, paused);
  if (answer !== null && !paused) await armNamespace(d, namespace);
  return answer;
}

/** `defines`: the client's own definitions, by name (none: it has none); `force`: the client's default of add's `force`. */
export function clientSchedules(db: Db | undefined, namespace: string, defines: ReadonlyMap<string, Pick<Definition<any, any>, 'name' | 'concurrency' | 'rate' | 'lane'>> | undefined, force: boolean): ClientSchedules {
  const need = (): Db => {
    if (!db) throw new ConfigError('client.schedules needs a client with a db');
    return db;
  };
  const arm = (d: Db) => armNamespace(d, namespace);
  return {
    async add(definition, spec, options = {}) {
      const d = need();
      if (options !== null && (typeof options !== 'object' || Array.isArray(options))) throw new ConfigError(`schedules.add takes options { force? }, got ${shown(options)}`);
      knownKeys('schedules.add option', options ?? {}, ['force']);
      // A truthy non-boolean forced the schedule of a definition no worker declared.
      if (options?.force !== undefined && typeof options.force !== 'boolean') throw new ConfigError(`schedules.add: force must be a boolean, got ${shown(options.force)}`);
      const given = definition as { name?: unknown; handler?: unknown } | null;
      const isDefinition = given !== null && typeof given === 'object' && typeof given.handler === 'function';
      if (typeof definition !== 'string' && !isDefinition) throw new ConfigError(`schedules.add: the definition is a name or the definition itself (defineJob), got ${JSON.stringify(definition) ?? typeof definition}`);
      const name = nameOption('the definition of schedules.add', isDefinition ? given.name : definition, MAX_NAME_BYTES);
      const def = isDefinition ? (definition as Pick<Definition<any, any>, 'name' | 'concurrency' | 'rate' | 'lane'>) : defines?.get(name);
      const checked = checkScheduleSpec('schedules.add', spec, name);
      // A worker option declares these (src/recurring/system.ts); its declared schedule would replace a runtime one of the name.
      if (checked.name.startsWith('sys.')) {
        throw new ConfigError(`schedules.add: schedule names beginning "sys." are acta's system schedules (sys.retention, sys.alerts, sys.outbox), declared by worker options; "${checked.name}" cannot be added at runtime`);
      }
      const s = { ...checked, ...policyKeys(def, checked.payload, checked) };
      if (!def) {
        const { rows } = await d.query<{ found: boolean; here: string[]; policy: { concurrency?: unknown; rate?: unknown; lane?: unknown } | null }>(
          `select exists (select 1 from acta.definitions d where d.namespace = $1 and d.name = $2) as found,
                  array(select d.name from acta.definitions d where d.namespace = $1 order by d.name limit 21) as here,
                  (select d.policy from acta.definitions d where d.namespace = $1 and d.name = $2) as policy`,
          [namespace, name],
        );
        // The keys an enqueue by name must give (acta.enqueue_jobs, "Rule"): its fires need them too.
        const missing = missingPolicyKeys(rows[0]?.policy, s).map((m) => (m === 'lane' ? 'lane' : `${m}Key`));
        if (missing.length > 0) {
          throw Object.assign(
            new ConfigError(
              `schedules.add: definition "${name}" admits its jobs by ${missing.join(', ')}, which a schedule added by name cannot compute: ` +
                `give ${missing.join(', ')} in the spec, or add it with the definition itself (or a client given its definitions)`,
            ),
            { missingKeys: missing }, // the CLI names its flags (src/ops/cli/schedule.ts)
          );
        }
        const unused = rows[0]?.found === true ? unusedPolicyKeys(rows[0]?.policy, s).map((m) => `${m}Key`) : [];
        if (unused.length > 0) {
          throw Object.assign(
            new ConfigError(`schedules.add: definition "${name}" declares no ${unused.map((k) => k.replace('Key', '')).join(' or ')} policy: ${unused.join(', ')} would limit nothing of its own; leave ${unused.length > 1 ? 'them' : 'it'} out`),
            { unusedKeys: unused },
          );
        }
        const here = rows[0]?.here ?? [];
        if (!(options?.force ?? force) && rows[0]?.found !== true) {
          throw new ConfigError(
            `schedules.add: no worker of namespace "${namespace}" has declared definition "${name}", so its fires would never run ` +
              `(declared there: ${here.length === 0 ? 'none' : here.slice(0, 20).join(', ') + (here.length > 20 ? ', …' : '')}). ` +
              'Start a worker that declares it first, give the client its definitions, or pass { force: true } (acta schedule add --force)',
          );
        }
      }
      // The zone as stored when it is the same zone: another ICU's name for it is no change.
      const [asStored] = schedulesAsStored([s], await storedZones(d, namespace, [s.name]));
      const answer = await putRuntimeSchedule(d, namespace, name, asStored);
      if (answer === 'declared') throw new ConfigError(`schedule "${s.name}" is declared in code: change it there`);
      await arm(d);
      return answer;
    },
    list: async (name) => listSchedules(need(), namespace, name === undefined || name === null ? undefined : scheduleName(name)),
    pause: async (name) => (await setPausedAnswer(need(), namespace, scheduleName(name), true)) !== null,
    resume: async (name) => (await setPausedAnswer(need(), namespace, scheduleName(name), false)) !== null,
    trigger: async (name) => triggerSchedule(need(), namespace, scheduleName(name)),
    async remove(name) {
      const answer = await removeSchedule(need(), namespace, scheduleName(name));
      if (answer === 'declared') {
        const how = name.startsWith('sys.') ? 'by a worker option (retention, alerts, outbox; acta worker --retention, --alerts, --outbox): pause it to stop it' : 'in code: remove it there (or pause it)';
        throw new ConfigError(`schedule "${name}" is declared ${how}`);
      }
      return answer === 'removed';
    },
  };
}
