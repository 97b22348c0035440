import type { Db } from '../db/Db';
import { armSchedules, listSchedules, putRuntimeSchedule, removeSchedule, type ScheduleRecord, setSchedulePaused, triggerSchedule, unarmedSchedules } from '../db/schedules';
import { knownKeys, MAX_NAME_BYTES, nameOption } from '../config';
import { ConfigError } from '../errors';
import { armInstants, checkScheduleSpec, scheduleOf, type ScheduleSpec } from '../recurring/schedules';

/**
 * Schedules at runtime (docs/schedules.md, "At runtime"), beside the ones declared in code. Names
 * are unique in the namespace; a declared schedule can be paused, resumed and triggered here, but
 * is changed or removed only in code (ConfigError). Each call arms what it leaves unarmed at once.
 */
export interface ClientSchedules {
  /**
   * Adds a schedule of `definition` (a name), or changes the runtime one of that name (its unstarted
   * fire re-armed): 'added', 'changed' or 'same'. Throws ConfigError for a bad spec, a cron that
   * never fires, a declared schedule's name, or a definition that no worker of the namespace has
   * declared and the client does not define (its fires would never run), unless `force`
   * (default: the client's).
   */
  add(definition: string, spec: ScheduleSpec, options?: { force?: boolean }): Promise<'added' | 'changed' | 'same'>;
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

/** `defines`: the client's own definitions, by name (none: it has none); `force`: the client's default of add's `force`. */
export function clientSchedules(db: Db | undefined, namespace: string, defines: ReadonlyMap<string, unknown> | undefined, force: boolean): ClientSchedules {
  const need = (): Db => {
    if (!db) throw new ConfigError('client.schedules needs a client with a db');
    return db;
  };
  const arm = async (d: Db) => {
    const { names, versions, instants } = armInstants(await unarmedSchedules(d, namespace));
    await armSchedules(d, namespace, names, versions, instants);
  };
  return {
    async add(definition, spec, options = {}) {
      const d = need();
      knownKeys('schedules.add option', options ?? {}, ['force']);
      if (typeof definition !== 'string') throw new ConfigError(`schedules.add: the definition is a name, got ${JSON.stringify(definition)}`);
      nameOption('the definition of schedules.add', definition, MAX_NAME_BYTES);
      const s = checkScheduleSpec('schedules.add', spec, definition);
      if (scheduleOf(s.cron, s.timeZone).next(new Date()) === null) {
        throw new ConfigError(`schedules.add: cron ${JSON.stringify(s.cron)} in ${s.timeZone} has no instant from now on: it would never fire`);
      }
      if (!(options?.force ?? force) && !defines?.has(definition)) {
        const { rows } = await d.query<{ found: boolean; here: string[] }>(
          `select exists (select 1 from acta.definitions d where d.namespace = $1 and d.name = $2) as found,
                  array(select d.name from acta.definitions d where d.namespace = $1 order by d.name limit 21) as here`,
          [namespace, definition],
        );
        const here = rows[0]?.here ?? [];
        if (rows[0]?.found !== true) {
          throw new ConfigError(
            `schedules.add: no worker of namespace "${namespace}" has declared definition "${definition}", so its fires would never run ` +
              `(declared there: ${here.length === 0 ? 'none' : here.slice(0, 20).join(', ') + (here.length > 20 ? ', …' : '')}). ` +
              'Start a worker that declares it first, give the client its definitions, or pass { force: true } (acta schedule add --force)',
          );
        }
      }
      const answer = await putRuntimeSchedule(d, namespace, definition, s);
      if (answer === 'declared') throw new ConfigError(`schedule "${s.name}" is declared in code: change it there`);
      await arm(d);
      return answer;
    },
    list: (name) => listSchedules(need(), namespace, name),
    pause: (name) => setSchedulePaused(need(), namespace, name, true),
    async resume(name) {
      const d = need();
      const found = await setSchedulePaused(d, namespace, name, false);
      if (found) await arm(d);
      return found;
    },
    trigger: (name) => triggerSchedule(need(), namespace, name),
    async remove(name) {
      const answer = await removeSchedule(need(), namespace, name);
      if (answer === 'declared') throw new ConfigError(`schedule "${name}" is declared in code: remove it there (or pause it)`);
      return answer === 'removed';
    },
  };
}
