/*
 * The rule `acta pause` and the dashboard's Pause share: a pause whose scope no worker has declared
 * (acta.definitions) is refused, nothing paused. A typo would otherwise report "paused" and hold
 * nothing that runs, a pause nobody sees take effect. client.pause does not check (a program may
 * pause ahead: docs/reference.md, "Admin operations"). Held by test/cli.test.ts ("acta pause refuses
 * a scope no worker has declared") and test/dashboard.test.ts ("the Pause form refuses").
 */
import type { Queryable } from '../db/Db';
import { ActaError } from '../errors';

/** Who is told: the command line (its flags) or the dashboard (its form). */
export type PauseWords = 'cli' | 'dashboard';

const quote = (s: string) => JSON.stringify(s);

/**
 * Throws ActaError ACTA_PAUSE_UNDECLARED when no worker has declared any definition in `namespace`
 * (no definition given), or not `definition` in it; its message lists the definitions declared
 * there and the namespaces declaring that name, in the words of `words`.
 */
export async function assertPauseDeclared(db: Queryable, namespace: string, definition: string | undefined, words: PauseWords): Promise<void> {
  const { rows } = await db.query<{ here: string[]; elsewhere: string[] }>(
    `select array(select d.name from acta.definitions d where d.namespace = $1 order by d.name limit 21) as here,
            array(select d.namespace from acta.definitions d where d.name = $2 and d.namespace <> $1 order by d.namespace limit 6) as elsewhere`,
    [namespace, definition ?? null],
  );
  const here = rows[0]?.here ?? [];
  const elsewhere = rows[0]?.elsewhere ?? [];
  const cli = words === 'cli';
  const force = cli
    ? 'nothing paused; check the name, or give --force to pause it anyway (e.g. before its worker is first deployed)'
    : 'nothing paused; check the name (to pause it before its worker is first deployed: acta pause --force)';
  if (definition === undefined) {
    if (here.length > 0) return;
    throw new ActaError('ACTA_PAUSE_UNDECLARED', `no worker has declared any job definition in namespace ${quote(namespace)} (${cli ? 'acta namespaces' : 'the overview'} lists the namespaces): ${force}`);
  }
  if (here.includes(definition)) return;
  const declared = here.length === 0 ? 'none' : `${here.slice(0, 20).map(quote).join(', ')}${here.length > 20 ? ', and more' : ''}`;
  const where = cli ? `--namespace ${quote(elsewhere[0])}` : `pause it from that namespace's overview`;
  const hint = elsewhere.length === 0 ? '' : `; ${quote(definition)} is declared in namespace ${elsewhere.slice(0, 5).map(quote).join(', ')}${elsewhere.length > 5 ? ', …' : ''} (${where})`;
  throw new ActaError('ACTA_PAUSE_UNDECLARED', `no worker has declared a job definition named ${quote(definition)} in namespace ${quote(namespace)} (declared there: ${declared})${hint}: ${force}`);
}
