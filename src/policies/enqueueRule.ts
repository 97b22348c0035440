/**
 * Which jobs an enqueue refuses by the namespace's stored definitions (docs/reference.md, "Which
 * definitions a client may enqueue"): one rule for the library and `acta enqueue`. The rule itself
 * runs in the enqueue's own statement (acta.enqueue_jobs, "Rule"; the memory ledger mirrors it), so
 * it reads the declarations as they are at that instant and costs no round trip; this module turns
 * its refusal (SQLSTATE AC001) into an EnqueueRefusedError whose message names the fix, in the
 * words of the library or of the command line.
 */
import type { Queryable } from '../db/Db';
import { type EnqueueRefusal, EnqueueRefusedError } from '../errors';

/**
 * The keys a job of a definition stored with `policy` lacks: the Rule's second half, as
 * acta.enqueue_jobs applies it (a concurrency or rate policy, or lanes, each needs its key). The
 * memory ledger and client.schedules.add (a schedule by name) apply it here.
 */
export function missingPolicyKeys(
  policy: { concurrency?: unknown; rate?: unknown; lane?: unknown } | null | undefined,
  keys: { concurrencyKey?: string | null; rateKey?: string | null; lane?: string | null },
): EnqueueRefusal['missing'] {
  const missing: EnqueueRefusal['missing'] = [];
  if (policy?.concurrency && (keys.concurrencyKey ?? null) === null) missing.push('concurrency');
  if (policy?.rate && (keys.rateKey ?? null) === null) missing.push('rate');
  if (policy?.lane === true && (keys.lane ?? null) === null) missing.push('lane');
  return missing;
}

/**
 * The keys a job of a definition stored with `policy` carries for a policy the definition does not
 * declare: the Rule's third half (a concurrency or rate key there limits nothing of its own, yet
 * joins another definition's limit or meter of that key), as acta.enqueue_jobs applies it.
 */
export function unusedPolicyKeys(
  policy: { concurrency?: unknown; rate?: unknown } | null | undefined,
  keys: { concurrencyKey?: string | null; rateKey?: string | null },
): ('concurrency' | 'rate')[] {
  const unused: ('concurrency' | 'rate')[] = [];
  if (!policy?.concurrency && (keys.concurrencyKey ?? null) !== null) unused.push('concurrency');
  if (!policy?.rate && (keys.rateKey ?? null) !== null) unused.push('rate');
  return unused;
}

/** The SQLSTATE acta.enqueue_jobs raises for a refused element. */
export const ENQUEUE_REFUSED_SQLSTATE = 'AC001';

/** What the refusal's DETAIL holds: the element (0-based), its name, the keys it lacks, those given without their policy. */
export interface RefusedElement {
  item: number;
  name: string;
  missing: EnqueueRefusal['missing'];
  unused?: EnqueueRefusal['unused'];
}

/** The refused element of `err`, or undefined when `err` is not the rule's refusal. */
export function refusedElement(err: unknown): RefusedElement | undefined {
  const e = err as { code?: unknown; detail?: unknown } | null;
  if (e === null || typeof e !== 'object' || e.code !== ENQUEUE_REFUSED_SQLSTATE || typeof e.detail !== 'string') return undefined;
  try {
    return JSON.parse(e.detail) as RefusedElement;
  } catch {
    return undefined;
  }
}

/**
 * The facts for the message: the names declared in `namespace` and the namespaces that declare
 * `name` (one statement; only on the refusal's path). `q`: the database outside the caller's
 * transaction, which the refusal aborted; none (a memory ledger): no hints.
 */
export async function refusal(q: Queryable | undefined, namespace: string, element: RefusedElement): Promise<EnqueueRefusal> {
  const facts: EnqueueRefusal = { namespace, name: element.name, missing: element.missing, unused: element.unused ?? [], declaredHere: q === undefined ? null : [], elsewhere: [] };
  if (q === undefined || element.missing.length > 0 || facts.unused.length > 0) return facts;
  const { rows } = await q
    .query<{ here: string[] | null; elsewhere: string[] | null }>(
      `select array(select d.name from acta.definitions d where d.namespace = $1 order by d.name limit 21) as here,
              array(select d.namespace from acta.definitions d where d.name = $2 and d.namespace <> $1 order by d.namespace limit 6) as elsewhere`,
      [namespace, element.name],
    )
    .catch(() => ({ rows: [] as { here: string[] | null; elsewhere: string[] | null }[] }));
  return { ...facts, declaredHere: rows[0]?.here ?? [], elsewhere: rows[0]?.elsewhere ?? [] };
}

/** The words of a fix: the library's options (enqueue's, or a child's of ctx.spawn), or `acta enqueue`'s flags. */
export type FixWords = 'library' | 'spawn' | 'cli';

const quote = (s: string) => JSON.stringify(s);

/** The error for `r`, its message naming the fix in `words`. */
export function refusedError(r: EnqueueRefusal, words: FixWords): EnqueueRefusedError {
  const cli = words === 'cli';
  const option = (m: string) => (cli ? `--${m === 'lane' ? 'lane' : `${m}-key`}` : m === 'lane' ? 'lane' : `${m}Key`);
  if (r.missing.length === 0 && r.unused.length > 0) {
    return new EnqueueRefusedError(
      r,
      `definition ${quote(r.name)} declares no ${r.unused.join(' or ')} policy: ${r.unused.map(option).join(', ')} would limit nothing of its own (and join another definition's limit or meter of that key); leave ${r.unused.length > 1 ? 'them' : 'it'} out`,
    );
  }
  if (r.missing.length > 0) {
    const compute = cli ? "pass --definitions <the worker's module> to compute them" : 'give enqueue the definition itself (or the client its `definitions`) to compute them';
    return new EnqueueRefusedError(
      r,
      `definition ${quote(r.name)} declares ${r.missing.join(', ')} policy: its jobs need keys, which its key functions compute from the payload; ${compute}, or ${r.missing.map(option).join(', ')}`,
    );
  }
  const hint = r.elsewhere.length === 0 ? '' : `; ${quote(r.name)} is declared in namespace ${r.elsewhere.slice(0, 5).map(quote).join(', ')}${r.elsewhere.length > 5 ? ', …' : ''} (${cli ? '--namespace' : 'the client\'s namespace'} ${quote(r.elsewhere[0])})`;
  const force = cli
    ? 'to enqueue it anyway (a definition whose worker has not started yet): --force'
    : `to enqueue it anyway (a definition whose worker has not started yet): the ${words === 'spawn' ? 'spawn' : 'enqueue'} option { force: true }`;
  if (r.declaredHere === null) {
    return new EnqueueRefusedError(r, `no worker has declared a job definition named ${quote(r.name)} in namespace ${quote(r.namespace)}; start its worker first, or ${force}`);
  }
  if (r.declaredHere.length === 0) {
    return new EnqueueRefusedError(
      r,
      `no worker has declared any job definition in namespace ${quote(r.namespace)} yet (a worker declares its definitions when it starts), so none runs ${quote(r.name)}${hint}; start its worker first, or ${force}`,
    );
  }
  const known = `${r.declaredHere.slice(0, 20).map(quote).join(', ')}${r.declaredHere.length > 20 ? ', and more' : ''}`;
  return new EnqueueRefusedError(r, `no worker has declared a job definition named ${quote(r.name)} in namespace ${quote(r.namespace)}; declared there: ${known}${hint}; ${force}`);
}
