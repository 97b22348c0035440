import { InvalidJsonError } from './errors';

/**
 * In JSON.stringify's output (well-formed since ES2019), `\u0000` and every surrogate escape
 * `\ud800`..`\udfff` stand for a NUL or a LONE surrogate (paired ones are written raw). Preceded
 * by an even number of backslashes, so an escaped backslash followed by "u0000" does not match.
 */
const JSONB_REJECTS = /(?<!\\)(?:\\\\)*\\u(?:0000|d[89a-f][0-9a-f]{2})/i;

/**
 * Serialises `value` to JSON text that PostgreSQL `jsonb` accepts, or throws InvalidJsonError
 * naming the path of the bad value (`$.a[2].b`). Refused: BigInt, circular references,
 * `undefined`, a function or a symbol at the top level, and strings or keys holding `\u0000` or a
 * lone UTF-16 surrogate, which jsonb rejects (PostgreSQL docs, "JSON Types"). Everything else
 * follows JSON.stringify (undefined members dropped, non-finite numbers to null, toJSON honoured).
 * Cost: one JSON.stringify and one regex scan; the path is searched only on failure.
 */
export function toJsonText(value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    let found: { path: string; reason: string } | undefined;
    try {
      found = findBadValue(value);
    } catch (walkErr) {
      // Nested deeper than the stack allows (JSON.stringify overflowed too): no path to name.
      if (!(walkErr instanceof RangeError)) throw walkErr;
    }
    const reason = err instanceof RangeError ? `nested too deeply to serialise (${err.message})` : err instanceof Error ? err.message : String(err);
    throw new InvalidJsonError(found?.path ?? '$', found?.reason ?? reason, { cause: err });
  }
  if (text === undefined) throw new InvalidJsonError('$', `${typeof value} is not JSON`);
  if (JSONB_REJECTS.test(text)) {
    const found = findBadValue(value);
    throw new InvalidJsonError(found?.path ?? '$', found?.reason ?? 'string contains \\u0000 or a lone surrogate');
  }
  return text;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why PostgreSQL text/jsonb cannot store `s` as it is (a NUL; a lone surrogate, stored as U+FFFD), or undefined if it can. */
export function badString(s: string): string | undefined {
  if (s.includes('\u0000')) return 'string contains \\u0000';
  if (LONE_SURROGATE.test(s)) return 'string contains a lone UTF-16 surrogate';
  return undefined;
}

/** The slow path: walks `value` as JSON.stringify would and names the first value jsonb refuses. */
function findBadValue(value: unknown): { path: string; reason: string } | undefined {
  const ancestors = new Set<unknown>();
  const walk = (v: unknown, path: string): { path: string; reason: string } | undefined => {
    if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
      try {
        v = (v as { toJSON: () => unknown }).toJSON();
      } catch (err) {
        return { path, reason: `toJSON threw: ${err instanceof Error ? err.message : String(err)}` };
      }
    }
    // Boxed primitives serialise as their primitive (new String('…'), Object(1n)), as in JSON.stringify.
    if (v instanceof String || v instanceof Number || v instanceof Boolean || v instanceof BigInt) v = v.valueOf();
    if (typeof v === 'bigint') return { path, reason: 'BigInt is not JSON (convert it to a string or number)' };
    if (typeof v === 'string') {
      const reason = badString(v);
      return reason ? { path, reason } : undefined;
    }
    if (v === null || typeof v !== 'object') return undefined;
    if (ancestors.has(v)) return { path, reason: 'circular reference' };
    ancestors.add(v);
    try {
      if (Array.isArray(v)) {
        for (let i = 0; i < v.length; i++) {
          const found = walk(v[i], `${path}[${i}]`);
          if (found) return found;
        }
      } else {
        for (const [key, member] of Object.entries(v)) {
          const keyReason = badString(key);
          if (keyReason) return { path: `${path}.${key}`, reason: `key: ${keyReason}` };
          const found = walk(member, `${path}.${key}`);
          if (found) return found;
        }
      }
    } finally {
      ancestors.delete(v);
    }
    return undefined;
  };
  return walk(value, '$');
}
