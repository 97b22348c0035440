import { types } from 'node:util';

/*
 * A bounded description of any value: how a value that is not an Error (thrown, or as a cause)
 * is named in a stored error (src/worker/storedError.ts). Held by test/describeValue.spec.ts; the cases
 * that set its bounds: docs/decisions/2026-12-02-bounded-error-descriptions.md.
 */

/** The longest description `describeValue` gives, in characters (acta's own bound: a description names a value, it does not store it). */
const DESCRIBE_MAX_CHARS = 1_000;
/** Nesting `describeValue` follows before it writes `"[…]"`. */
const DESCRIBE_MAX_DEPTH = 50;
/**
 * Members, elements and objects `describeValue` looks at, written or left out, before it stops:
 * members JSON leaves out (undefined values, functions) write nothing, so the character bound
 * alone would not end the walk. acta's own bound.
 */
const DESCRIBE_MAX_STEPS = 5_000;
const DESCRIBED = Symbol('description full');

/** `<Buffer of 20 bytes>` for binary data (a Buffer, a typed array, a DataView, an ArrayBuffer); undefined for anything else. */
function binaryName(value: object): string | undefined {
  if (Buffer.isBuffer(value)) return `<Buffer of ${value.byteLength} bytes>`;
  if (ArrayBuffer.isView(value) || types.isAnyArrayBuffer(value)) {
    return `<${Object.prototype.toString.call(value).slice(8, -1)} of ${(value as ArrayBuffer).byteLength} bytes>`;
  }
  return undefined;
}

/** The largest bigint `describeValue` writes in digits (acta's own bound: a huge bigint's decimal text takes long to write out). */
const BIGINT_MAX_DIGITS = 10n ** 1_000n;

/** `10n`, or `<a bigint of over 1000 digits>` (the comparison is linear in its size; its decimal text is not). */
function bigintText(v: bigint): string {
  return v >= BIGINT_MAX_DIGITS || v <= -BIGINT_MAX_DIGITS ? '<a bigint of over 1000 digits>' : `${v}n`;
}

/**
 * The best short string form of any value, at most DESCRIBE_MAX_CHARS characters (and `…` where
 * cut). Never throws, and its time is bounded by DESCRIBE_MAX_STEPS (beyond listing each object's
 * own keys once, which V8 does whole before the first is read). A string as it is, a bigint as
 * bigintText, binary data as binaryName, a Proxy as `[a Proxy]` (its traps would run per key);
 * anything else as the start of its JSON form (toJSON honoured, a boxed primitive unwrapped,
 * functions and symbols left out, a cycle as "[Circular]", keys cut at 1,000 characters), written
 * by a walk that stops at the bound, not by serialising the whole value first: up to 24 values are
 * described per error. An object whose reading throws (a getter, a
 * revoked Proxy) is described by what was written before, else by its tag.
 */
export function describeValue(value: unknown): string {
  const cut = (s: string) => (s.length > DESCRIBE_MAX_CHARS ? `${s.slice(0, DESCRIBE_MAX_CHARS)}…` : s);
  const parts: string[] = [];
  let length = 0;
  let steps = 0;
  const put = (s: string) => {
    parts.push(s);
    length += s.length;
    if (length > DESCRIBE_MAX_CHARS) throw DESCRIBED;
  };
  const step = () => {
    if (++steps > DESCRIBE_MAX_STEPS) {
      parts.push('…');
      throw DESCRIBED;
    }
  };
  const onPath = new Set<object>();
  /** Own enumerable keys per object, listed once however often the object is met (a value may reach one object many times). */
  const keysOf = new Map<object, string[]>();
  /** Writes `v` as JSON would (undefined, a function or a symbol: nothing, and false is returned). */
  const write = (v: unknown, key: string): boolean => {
    // JSON's order: toJSON first, then a boxed primitive's own value (read from its slot: a
    // redefined valueOf or toString is not called). A Proxy is named, before and after.
    if (v !== null && typeof v === 'object') {
      if (types.isProxy(v)) return put('"[a Proxy]"'), true;
      if (binaryName(v) === undefined && typeof (v as { toJSON?: unknown }).toJSON === 'function') v = (v as { toJSON(key: string): unknown }).toJSON(key);
    }
    if (v !== null && typeof v === 'object') {
      if (types.isProxy(v)) return put('"[a Proxy]"'), true;
      if (types.isNumberObject(v)) v = Number.prototype.valueOf.call(v);
      else if (types.isStringObject(v)) v = String.prototype.valueOf.call(v);
      else if (types.isBooleanObject(v)) v = Boolean.prototype.valueOf.call(v);
      else if (types.isBigIntObject(v)) v = BigInt.prototype.valueOf.call(v);
    }
    switch (typeof v) {
      case 'undefined':
      case 'function':
      case 'symbol':
        return false;
      case 'string':
        put(JSON.stringify(v.length > DESCRIBE_MAX_CHARS ? v.slice(0, DESCRIBE_MAX_CHARS) : v));
        return true;
      case 'number':
        put(Number.isFinite(v) ? String(v) : 'null');
        return true;
      case 'boolean':
        put(String(v));
        return true;
      case 'bigint':
        put(bigintText(v));
        return true;
    }
    if (v === null) return put('null'), true;
    const object = v as object;
    const binary = binaryName(object);
    if (binary !== undefined) return put(JSON.stringify(binary)), true;
    if (onPath.has(object)) return put('"[Circular]"'), true;
    if (onPath.size >= DESCRIBE_MAX_DEPTH) return put('"[…]"'), true;
    onPath.add(object);
    if (Array.isArray(object)) {
      put('[');
      for (let i = 0; i < object.length; i++) {
        step();
        if (i > 0) put(',');
        if (!write(object[i], String(i))) put('null');
      }
      put(']');
    } else {
      put('{');
      let first = true;
      let keys = keysOf.get(object);
      if (!keys) keysOf.set(object, (keys = Object.keys(object))); // own enumerable string keys, as JSON
      step();
      for (const k of keys) {
        step();
        const at = parts.length;
        const before = length;
        put(`${first ? '' : ','}${JSON.stringify(k.length > DESCRIBE_MAX_CHARS ? k.slice(0, DESCRIBE_MAX_CHARS) : k)}:`);
        if (write((object as Record<string, unknown>)[k], k)) first = false;
        else {
          parts.length = at; // a member JSON leaves out
          length = before;
        }
      }
      put('}');
    }
    onPath.delete(object);
    return true;
  };
  try {
    if (typeof value === 'string') return cut(value);
    if (typeof value === 'bigint') return cut(bigintText(value));
    if (value !== null && typeof value === 'object') {
      if (types.isProxy(value)) return '[a Proxy]';
      const binary = binaryName(value);
      if (binary !== undefined) return binary;
    }
    if (write(value, '')) return parts.join('');
  } catch (err) {
    if (err === DESCRIBED) return cut(parts.join(''));
    // A getter, a toJSON or a Proxy trap threw: what was written, if anything.
    if (parts.length > 0) return cut(`${parts.join('')}…`);
  }
  if (value !== null && (typeof value === 'object' || typeof value === 'function')) {
    // Not String(value): an array's would join all of its elements.
    try {
      return typeof value === 'function' ? cut(String(value)) : Object.prototype.toString.call(value);
    } catch {
      return '[a value that cannot be read, e.g. a revoked Proxy]';
    }
  }
  try {
    return cut(String(value));
  } catch {
    return '[a value that cannot be read]';
  }
}
