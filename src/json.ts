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
 * `undefined`, a function or a symbol at the top level, strings or keys holding `\u0000` or a
 * lone UTF-16 surrogate, which jsonb rejects (PostgreSQL docs, "JSON Types"), a Map, a Set, a WeakMap
 * or a WeakSet (written as {}, their contents lost), and a value that
 * throws when read (a getter, a Proxy's trap, a revoked Proxy: the reason quotes it). Everything else
 * follows JSON.stringify (undefined members dropped, non-finite numbers to null, toJSON honoured).
 * A text of more than `maxBytes` in UTF-8 (default JSONB_MAX_BYTES; `limit` names the bound) is refused too.
 * Cost: one JSON.stringify, one regex scan and one search for {}; the value is walked only on
 * failure or when its text holds {}.
 */
export function toJsonText(value: unknown, maxBytes = JSONB_MAX_BYTES, limit = 'a jsonb value holds'): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    let found: { path: string; reason: string } | undefined;
    try {
      found = findBadValue(value);
    } catch {
      // Nested deeper than the stack allows (JSON.stringify overflowed too): no path to name.
    }
    const reason = isStackOverflow(err) ? `nested too deeply to serialise (${(err as Error).message})` : errorText(err);
    throw new InvalidJsonError(found?.path ?? '$', found?.reason ?? reason, { cause: err });
  }
  if (text === undefined) throw new InvalidJsonError('$', `${typeof value} is not JSON`);
  const bytes = bytesOver(text, maxBytes);
  if (bytes !== undefined) throw new InvalidJsonError('$', `its JSON text is ${bytes} bytes, more than the ${maxBytes} ${limit}`);
  if (JSONB_REJECTS.test(text)) {
    const found = findBadValue(value);
    throw new InvalidJsonError(found?.path ?? '$', found?.reason ?? 'string contains \\u0000 or a lone surrogate');
  }
  // A Map, a Set (and their weak kinds) serialise as {}, their entries lost: only a text holding
  // {} can hide one, so only such a text is walked (test/json.spec.ts, "a Map or a Set").
  if (text.includes('{}')) {
    const found = findBadValue(value);
    if (found) throw new InvalidJsonError(found.path, found.reason);
  }
  return text;
}

/**
 * `s`'s length in UTF-8 bytes when it is more than `max`, else undefined. A UTF-16 unit is at most
 * 3 bytes, so a string of at most max / 3 units is not counted (names and most texts).
 */
export function bytesOver(s: string, max: number): number | undefined {
  if (s.length * 3 <= max) return undefined;
  const bytes = Buffer.byteLength(s, 'utf8');
  return bytes > max ? bytes : undefined;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why PostgreSQL text/jsonb cannot store `s` as it is (a NUL; a lone surrogate, stored as U+FFFD), or undefined if it can. */
export function badString(s: string): string | undefined {
  if (s.includes('\u0000')) return 'string contains \\u0000';
  if (LONE_SURROGATE.test(s)) return 'string contains a lone UTF-16 surrogate';
  return undefined;
}

/**
 * The most bytes of JSON text acta stores as one jsonb value: jsonb's own bound (2^28 − 1 bytes,
 * PostgreSQL's JENTRY_OFFLENMASK; only a text of many escapes parses smaller). Beyond it the
 * database refuses the value (54000), or, past its 1 GB message bound once the driver has quoted
 * the batch, drops the connection, and the completion write would be repeated without end
 * (test/json.spec.ts, "refuses a text of more UTF-8 bytes than a jsonb value holds").
 */
export const JSONB_MAX_BYTES = 2 ** 28 - 1;

/** V8's "Maximum call stack size exceeded": the walk itself ran out of stack (see toJsonText). */
function isStackOverflow(err: unknown): boolean {
  return err instanceof RangeError && /call stack/i.test(err.message);
}

/** An error's message, or the thrown value as text; never throws. */
export function errorText(err: unknown): string {
  try {
    return err instanceof Error ? err.message : String(err);
  } catch {
    return 'a value that cannot be read';
  }
}

/**
 * The slow path: walks `value` as JSON.stringify would and names the first value jsonb refuses,
 * or the first one that throws when read (a getter, a Proxy's trap, a revoked Proxy), so that
 * enqueue throws InvalidJsonError with a path, not the user's own error (test/json.spec.ts,
 * "refuses a value that throws when read").
 */
/**
 * A member's step in a path: `.key` for an identifier, else `["key"]` in JSON's escapes, so a key
 * with a dot, a space or an unprintable character names one place and can be read
 * (test/json.spec.ts, "a key that is no identifier").
 */
export const member = (path: string, key: string): string => (/^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);

/** Why a Map, Set, WeakMap or WeakSet is refused (JSON.stringify writes each as {}), else undefined. */
function keyedCollection(v: object): string | undefined {
  if (v instanceof Map) return 'a Map is not JSON: stored, it would be {} with its entries lost (convert it, e.g. Object.fromEntries(map))';
  if (v instanceof Set) return 'a Set is not JSON: stored, it would be {} with its members lost (convert it, e.g. [...set])';
  if (v instanceof WeakMap || v instanceof WeakSet) return `a ${v instanceof WeakMap ? 'WeakMap' : 'WeakSet'} is not JSON: stored, it would be {}`;
  return undefined;
}

function findBadValue(value: unknown): { path: string; reason: string } | undefined {
  const ancestors = new Set<unknown>();
  const walk = (v: unknown, path: string): { path: string; reason: string } | undefined => {
    try {
      if (v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') {
        try {
          v = (v as { toJSON: () => unknown }).toJSON();
        } catch (err) {
          if (isStackOverflow(err)) throw err;
          return { path, reason: `toJSON threw: ${errorText(err)}` };
        }
      }
      // Boxed primitives serialise as their primitive (new String('…'), Object(1n)), as in JSON.stringify.
      if (v instanceof String || v instanceof Number || v instanceof Boolean || v instanceof BigInt) v = v.valueOf();
    } catch (err) {
      if (isStackOverflow(err)) throw err;
      return { path, reason: `reading it threw: ${errorText(err)}` };
    }
    if (typeof v === 'bigint') return { path, reason: 'BigInt is not JSON (convert it to a string or number)' };
    if (typeof v === 'string') {
      const reason = badString(v);
      return reason ? { path, reason } : undefined;
    }
    if (v === null || typeof v !== 'object') return undefined;
    const lost = keyedCollection(v);
    if (lost) return { path, reason: lost };
    if (ancestors.has(v)) return { path, reason: 'circular reference' };
    ancestors.add(v);
    /** Reads one member, or says where reading threw. */
    const read = (key: string | number, at: string): { member?: unknown; thrown?: { path: string; reason: string } } => {
      try {
        return { member: (v as Record<string | number, unknown>)[key] };
      } catch (err) {
        if (isStackOverflow(err)) throw err;
        return { thrown: { path: at, reason: `reading it threw: ${errorText(err)}` } };
      }
    };
    try {
      let keys: string[];
      let length: number | undefined;
      try {
        length = Array.isArray(v) ? (v as unknown[]).length : undefined;
        keys = length === undefined ? Object.keys(v) : [];
      } catch (err) {
        if (isStackOverflow(err)) throw err;
        return { path, reason: `reading it threw: ${errorText(err)}` };
      }
      if (length !== undefined) {
        for (let i = 0; i < length; i++) {
          const { member, thrown } = read(i, `${path}[${i}]`);
          const found = thrown ?? walk(member, `${path}[${i}]`);
          if (found) return found;
        }
      } else {
        for (const key of keys) {
          const keyReason = badString(key);
          const at = member(path, key);
          if (keyReason) return { path: at, reason: `key: ${keyReason}` };
          const { member: child, thrown } = read(key, at);
          const found = thrown ?? walk(child, at);
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

/*
 * The JSON form of a type: what a value of it is once stored as jsonb and read back, by the rules of
 * toJsonText above (JSON.stringify's, docs/reference.md "Payloads and results as JSON"). Types only:
 * nothing here runs. Held by test/types/typedIds.ts.
 */

/** What JSON.stringify drops from an object, writes as null in an array, and cannot store alone. */
type Unstorable = undefined | void | symbol | ((...args: never[]) => unknown) | (abstract new (...args: never[]) => unknown);

/**
 * A handler's result `T` as acta stores it and client.result reads it back: `toJSON` honoured (a
 * `Date` becomes its ISO string), `undefined` members dropped (optional), function and symbol
 * members dropped, `undefined` and functions in arrays null, `undefined` alone null (the handler
 * resolved nothing). What jsonb cannot store at all (a bigint, a Map, a Set, a function alone) is
 * `never`: its job ends Failed. `any` and `unknown` stay as they are; numbers stay `number`
 * (NaN and ±Infinity are stored as null).
 */
export type Jsonified<T> = 0 extends 1 & T ? any : unknown extends T ? unknown : T extends undefined | void ? null : JsonValue<T>;

/** A value in an array: what an object would drop is null there. */
type JsonElement<T> = 0 extends 1 & T ? any : unknown extends T ? unknown : T extends Unstorable ? null : JsonValue<T>;

/** A member's value, its dropped part (undefined, a function) already taken out by JsonObject. */
type JsonMember<T> = 0 extends 1 & T ? any : unknown extends T ? unknown : JsonValue<T>;

type JsonValue<T> = T extends { toJSON(...args: never[]): infer J }
  ? Jsonified<J>
  : T extends string | number | boolean | null
    ? T
    : T extends bigint | Unstorable | ReadonlyMap<unknown, unknown> | ReadonlySet<unknown> | WeakMap<object, unknown> | WeakSet<object>
      ? never
      : T extends readonly unknown[]
        ? { -readonly [K in keyof T]: JsonElement<T[K]> }
        : T extends object
          ? JsonObject<T>
          : never;

/**
 * How key K of T is written: 'always', 'maybe' (optional, or its value may be undefined or a
 * function), 'dropped' (a symbol key, or only ever undefined or a function), or 'index' (an index
 * signature: each present key is written).
 */
type KeyKind<T, K extends keyof T> = K extends symbol
  ? 'dropped'
  : string extends K
    ? 'index'
    : number extends K
      ? 'index'
      : [Exclude<T[K], Unstorable>] extends [never]
        ? 'dropped'
        : {} extends Pick<T, K>
          ? 'maybe'
          : [Extract<T[K], Unstorable>] extends [never]
            ? 'always'
            : 'maybe';

type JsonObject<T> = Flat<
  { -readonly [K in keyof T as KeyKind<T, K> extends 'always' | 'index' ? K : never]: JsonMember<Exclude<T[K], Unstorable>> } & {
    -readonly [K in keyof T as KeyKind<T, K> extends 'maybe' ? K : never]?: JsonMember<Exclude<T[K], Unstorable>>;
  }
>;

/** One object type for an intersection, as an editor shows it. */
type Flat<T> = { [K in keyof T]: T[K] } & {};
