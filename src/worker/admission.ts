import { identity, type MonoTypeOperatorFunction } from 'rxjs';
import type { Entry } from './registry';

/**
 * Admission (docs/DESIGN.md, "Policies"): the stage between the claim and the executors where a
 * concurrency slot, then a rate token, will be taken for each attempt. Today every attempt is
 * admitted as it comes. Its contract, for the stage to come: every entry that enters comes out,
 * in order, or is handed back (uncharged); it never holds an entry's permit beyond the entry.
 */
export function admit(): MonoTypeOperatorFunction<Entry> {
  return identity;
}
