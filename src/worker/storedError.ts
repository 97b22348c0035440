import { types } from 'node:util';
import { PIPELINE } from '../config';
import { describeValue } from './describeValue';
import { InvalidJsonError } from '../errors';

/*
 * An attempt's error as acta stores it (StoredError, src/db/types.ts) and as the
 * worker logs it: bounded in size and time whatever the handler threw, and never throwing. Held
 * by test/faults/completion.test.ts (stored and logged errors) and test/describeValue.spec.ts.
 */

/**
 * An Error of this realm or of another (`vm` contexts, whose Errors are not `instanceof` this
 * realm's Error, and must be retried as one: test/faults/completion.test.ts, "another realm's
 * Error is an Error"); false for a value on which the test throws (e.g. a revoked Proxy).
 */
export function isError(err: unknown): err is Error {
  try {
    return err instanceof Error || types.isNativeError(err);
  } catch {
    return false;
  }
}

/** `value instanceof type`, false where the test throws (a Proxy whose getPrototypeOf trap throws). */
export function isInstance(value: unknown, type: abstract new (...args: never[]) => unknown): boolean {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

const UNSTORABLE = /[\u0000]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * A string jsonb accepts, at most PIPELINE.errorTextMaxChars long plus a note of what was cut:
 * NUL and lone surrogates (one a cut may leave) become U+FFFD.
 */
function storable(s: string, max: number = PIPELINE.errorTextMaxChars): string {
  const kept = s.length > max ? `${s.slice(0, max)}… [${s.length - max} more characters not stored]` : s;
  return kept.replace(UNSTORABLE, '\uFFFD');
}

/** Reads `value[key]` as a string; a throwing getter or a non-string gives undefined. */
function stringField(value: object, key: string): string | undefined {
  try {
    const v = (value as Record<string, unknown>)[key];
    return typeof v === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The error of an attempt as storable JSON text: `{ name, message, code?, path?, stack?, cause?,
 * errors? }` for an Error (of any realm; `cause` its cause chain and `errors` an AggregateError's
 * elements, each `{ name, message, code?, cause? }`, bounded by NESTED_ERRORS); `{ name: 'NonErrorThrown', message: 'handler threw a non-Error value
 * (<type>): <its best string form>' }` for anything else. NUL and lone surrogates become U+FFFD;
 * each text is cut at PIPELINE.errorTextMaxChars (64 Ki characters). Never throws.
 */
export function errorJson(err: unknown, name?: string): string {
  return storedErrorText(storedError(err, name), name);
}

/** The fields errorJson stores, as an object (also what the worker logs of a failed attempt: bounded like the stored text). Never throws. */
export function storedError(err: unknown, name?: string): Record<string, unknown> {
  try {
    return errorFields(err, name);
  } catch {
    // Not expected: every read of `err` is guarded. But this must not throw, or the attempt's
    // completion is never made (a Proxy of an Error whose traps throw only on a later call:
    // test/faults/completion.test.ts, "a user's code that throws where acta reads it").
    return unreadable(name);
  }
}

/**
 * The error of an attempt as the worker logs it: storedError's fields, plus the error's own
 * enumerable fields of simple values (strings cut at 1,000 characters, finite numbers, booleans;
 * at most 20 of the first 100, names of at most 100 characters), e.g. a pg error's `detail` and `constraint`, an HTTP error's `status`, a system
 * error's `syscall` and `port`, which the stored form leaves out (test/faults/completion.test.ts,
 * "an error's cause chain and an AggregateError's errors"). Never throws.
 */
export function loggedError(err: unknown, stored: Record<string, unknown>): Record<string, unknown> {
  const own: Record<string, unknown> = {};
  if (isError(err) && !types.isProxy(err)) {
    // (Not a Proxy's: its traps would run for every key of its target, e.g. each element of a typed array.)
    try {
      let n = 0;
      let looked = 0;
      for (const key in err) {
        // At most 20 kept of the first 100 looked at; names of at most 100 characters: the line
        // stays bounded whatever the error holds.
        if (n >= 20 || ++looked > 100) break;
        if (key in stored || key.length > 100 || !Object.prototype.hasOwnProperty.call(err, key)) continue;
        let v: unknown;
        try {
          v = (err as unknown as Record<string, unknown>)[key];
        } catch {
          continue;
        }
        if (typeof v === 'string') own[key] = storable(v, 1_000);
        else if ((typeof v === 'number' && Number.isFinite(v)) || typeof v === 'boolean') own[key] = v;
        else continue;
        n++;
      }
    } catch {
      /* an ownKeys trap threw: the stored fields alone */
    }
  }
  return { ...own, ...stored };
}

/** The name and message of an error as stored (storedErrorText's JSON), for views that carry no more of it; undefined for null. Never throws. */
export function storedErrorSummary(text: string | null): { name: string; message: string } | undefined {
  if (text === null) return undefined;
  try {
    const { name, message } = JSON.parse(text) as { name?: unknown; message?: unknown };
    return { name: String(name), message: String(message) };
  } catch {
    return { name: 'Error', message: text };
  }
}

/** storedError's object as the JSON text stored. Never throws. */
export function storedErrorText(fields: Record<string, unknown>, name?: string): string {
  try {
    return JSON.stringify(fields);
  } catch {
    return JSON.stringify(unreadable(name)); // not expected: every field is a string, a finite number or such an object
  }
}

function unreadable(name?: string): Record<string, unknown> {
  return { name: name ?? 'Error', message: 'the error could not be read or serialised' };
}

/**
 * How much of an error's `cause` chain and of an AggregateError's `errors` errorJson stores: the
 * chain to 4 levels, the first 10 inner errors with one level of their own causes (and an
 * `Omitted` entry counting the rest; a cut chain ends in an `Omitted` cause), each as
 * `{ name, message, code? }` whose texts are cut at 4,096 characters (a non-Error cause's
 * description at 1,000, `describeValue`): at most 24 nested errors and 12 short markers, under 300 Ki
 * characters (3.4 MB of UTF-8 at worst, control characters escaped) beside
 * the error's own message and stack, whatever the handler threw (a cycle of causes, an `errors`
 * array with its own `slice`, a Proxy). acta's own choice; a completion larger than the 4 MiB
 * batch bound is written alone (docs/DESIGN.md, "The pipeline inside one worker": Finalizer).
 */
const NESTED_ERRORS = { causeDepth: 4, maxErrors: 10, textMaxChars: 4_096 } as const;

/**
 * `{ name, message, code? }` of `holder.cause`, with its own cause to `depth` levels; a non-Error
 * value as `{ name: 'NonErrorCause', message: <its description> }`; where depth is spent and
 * there is a further cause, `{ name: 'Omitted', message: 'further causes not stored' }` (a cut
 * chain says so, as a cut `errors` list does). Undefined when there is none or reading it throws.
 */
function causeFields(holder: object, depth: number): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    if (!('cause' in holder)) return undefined;
    value = (holder as { cause?: unknown }).cause;
  } catch {
    return undefined;
  }
  if (value === undefined) return undefined;
  if (depth <= 0) return { name: 'Omitted', message: 'further causes not stored' };
  return shortFields(value, depth);
}

/** One nested error (a cause, an AggregateError's element), shortened (NESTED_ERRORS). */
function shortFields(value: unknown, depth: number): Record<string, unknown> {
  const max = NESTED_ERRORS.textMaxChars;
  if (!isError(value)) return { name: 'NonErrorCause', message: storable(describeValue(value), max) };
  const out: Record<string, unknown> = {
    name: storable(stringField(value, 'name') ?? 'Error', max),
    message: storable(stringField(value, 'message') ?? '', max),
  };
  const code = codeField(value, max);
  if (code !== undefined) out.code = code;
  const cause = causeFields(value, depth - 1);
  if (cause !== undefined) out.cause = cause;
  return out;
}

/** An error's `code` when it is a string (cut at `max`) or a finite number; undefined otherwise or when reading it throws. */
function codeField(err: object, max?: number): string | number | undefined {
  let code: unknown;
  try {
    code = (err as { code?: unknown }).code;
  } catch {
    return undefined;
  }
  if (typeof code === 'string') return storable(code, max);
  return typeof code === 'number' && Number.isFinite(code) ? code : undefined;
}

/**
 * An AggregateError's `errors`: the first NESTED_ERRORS.maxErrors, read by index (not by the
 * array's own `slice` or `map`, which a subclass or a Proxy may redefine), and an `Omitted` entry
 * counting the rest; undefined for any other error, or when they cannot be read.
 */
function innerErrors(err: Error): Record<string, unknown>[] | undefined {
  try {
    if (!isInstance(err, AggregateError) && stringField(err, 'name') !== 'AggregateError') return undefined;
    const errors: unknown = (err as AggregateError).errors;
    if (!Array.isArray(errors)) return undefined;
    const length: unknown = errors.length;
    if (typeof length !== 'number' || !Number.isSafeInteger(length) || length < 0) return undefined;
    const out: Record<string, unknown>[] = [];
    for (let i = 0; i < Math.min(length, NESTED_ERRORS.maxErrors); i++) {
      let element: unknown;
      try {
        element = errors[i];
      } catch {
        element = undefined;
      }
      out.push(shortFields(element, 2));
    }
    if (length > NESTED_ERRORS.maxErrors) out.push({ name: 'Omitted', message: `${length - NESTED_ERRORS.maxErrors} more errors not stored` });
    return out;
  } catch {
    return undefined;
  }
}

/** The fields errorJson stores (see there). */
function errorFields(err: unknown, name?: string): Record<string, unknown> {
  let out: Record<string, unknown>;
  if (isError(err)) {
    out = {
      name: storable(name ?? stringField(err, 'name') ?? 'Error'),
      message: storable(stringField(err, 'message') ?? describeValue(err)),
    };
    const code = codeField(err);
    if (code !== undefined) out.code = code;
    if (isInstance(err, InvalidJsonError)) out.path = storable((err as InvalidJsonError).path);
    const stack = stringField(err, 'stack');
    if (stack) out.stack = storable(stack);
    const cause = causeFields(err, NESTED_ERRORS.causeDepth);
    if (cause !== undefined) out.cause = cause;
    const inner = innerErrors(err);
    if (inner !== undefined) out.errors = inner;
  } else {
    let type: string;
    try {
      type = err === null ? 'null' : Array.isArray(err) ? 'array' : typeof err;
    } catch {
      type = typeof err; // Array.isArray throws on a revoked Proxy
    }
    out = { name: name ?? 'NonErrorThrown', message: storable(`handler threw a non-Error value (${type}): ${describeValue(err)}`) };
  }
  return out;
}
