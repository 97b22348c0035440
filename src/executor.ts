import { types } from 'node:util';
import { Observable, type SchedulerLike } from 'rxjs';
import type { Logger } from 'pino';
import { PIPELINE } from './config';
import type { CompletionRow } from './db/functions';
import { backoffMs, type Definition } from './definition';
import { AttemptCancelledError, AttemptTimeoutError, ClaimExpiredError, InvalidJsonError, UnstorableStepResultError } from './errors';
import { toJsonText } from './json';
import type { Entry, Registry } from './registry';
import type { Step } from './steps';
import type { Timeouts } from './timeouts';

/** A completion record: what the finalizer writes for one attempt, and the entry it settles. */
export interface Completion {
  entry: Entry;
  row: CompletionRow;
  /** Result plus error size in UTF-8 bytes (the finalizer's 4 MiB bound). */
  bytes: number;
}

export interface ExecutorDeps {
  definitions: ReadonlyMap<string, Definition>;
  registry: Registry;
  logger: Logger;
  scheduler: SchedulerLike;
  /** Hands the completion to the finalizer. */
  hand: (completion: Completion) => void;
  /** Called when an attempt ends, by outcome (metrics). */
  onOutcome?: (completion: Completion) => void;
  /** The worker's execution timeouts (src/timeouts.ts), on `scheduler`. */
  timeouts: Timeouts;
  /** Builds the attempt's `ctx.step` (src/steps.ts); called on the handler's first use of it. */
  stepFor: (entry: Entry) => Step;
  /**
   * Called once when the returned Observable ends: completed (after the hand-off), errored, or
   * unsubscribed (the worker returns the entry's permit here).
   */
  settled?: () => void;
}

/**
 * Runs one entry (shared/DESIGN.md, "Executor"): skips it if its deadline already fired (the row
 * goes back uncharged), runs the handler with an AbortSignal and the definition's timeout, builds
 * the completion record and hands it to the finalizer. The returned Observable never errors: per
 * job, errors are values. `deps.settled` runs when it ends, i.e. only after the hand-off.
 * (One Observable per job, not defer + from(promise) + finalize: each layer is per-job allocation
 * and code that a fresh process runs cold; issue 5.)
 */
export function runEntry(entry: Entry, deps: ExecutorDeps): Observable<never> {
  return new Observable<never>((subscriber) => {
    entry.taken = true;
    execute(entry, deps).then(
      (completion) => {
        // Superseded by a new claim of the same job (its own claim was lost by the server): it
        // writes nothing; the new attempt owns the row (Registry.addClaimed).
        if (!subscriber.closed && deps.registry.isCurrent(entry)) {
          try {
            entry.state = 'finalizing';
            deps.onOutcome?.(completion);
            deps.hand(completion);
          } catch (err) {
            subscriber.error(err); // e.g. the finalizer is closed: the worker's fatal path
            return;
          }
        }
        subscriber.complete();
      },
      (err: unknown) => subscriber.error(err),
    );
    return deps.settled;
  });
}

async function execute(entry: Entry, deps: ExecutorDeps): Promise<Completion> {
  const { row } = entry;
  const definition = deps.definitions.get(row.definition);
  const attempt = row.attempts + 1;
  // Built on first use only: most handlers never log, and a pino child per job is not free.
  let childLogger: Logger | undefined;
  const jobLogger = () => (childLogger ??= deps.logger.child({ jobId: row.id, definition: row.definition, attempt }));
  if (definition && (entry.abortCause === 'deadline' || (!entry.aborted && deps.scheduler.now() >= entry.deadlineAt))) {
    // The attempt deadline passed before the handler could start (the claim reached this worker
    // late, or waited for an executor past it): the handler never runs. Back to Ready uncharged
    // while the job has uncharged returns left (recovery's bound); after that it costs an
    // attempt, so a claim that always arrives late (a huge payload at a short H) ends Failed
    // instead of looping forever.
    if (row.unchargedReturns < PIPELINE.unchargedReturnsMax) return complete(entry, 'expired', null, null, 0);
    const stored = storedError(new ClaimExpiredError(row.unchargedReturns));
    return failure(entry, definition, attempt, stored, () => stored, jobLogger);
  }
  if (!definition || entry.aborted) {
    // Never started (the worker is stopping, or the lease was found lost): back to Ready,
    // uncharged (an unknown definition cannot happen: the claim asks only for the worker's own
    // definitions).
    return complete(entry, 'handed_back', null, null, 0);
  }
  /** Ends the job Failed without retry, logging its error as stored (its cause may be the user's own error). */
  const failFinal = (stored: Record<string, unknown>, what: string): Completion => {
    safeLog(() => jobLogger().error({ error: stored }, `${what}: job fails without retry`));
    return complete(entry, 'failed_final', null, storedErrorText(stored), 0);
  };
  entry.state = 'executing';
  let step: Step | undefined;
  const timeoutMs = definition.timeoutMs ?? PIPELINE.executionTimeoutMs;
  const timeout = deps.timeouts.start(timeoutMs, () => deps.registry.abort(entry, 'timeout'));
  try {
    const value = await untilAborted(
      Promise.resolve().then(() =>
        definition.handler(row.payload, {
          get signal() {
            return entry.controller.signal;
          },
          jobId: row.id,
          attempt,
          execution: row.execution,
          definition: row.definition,
          get logger() {
            return jobLogger();
          },
          get step() {
            return (step ??= deps.stepFor(entry));
          },
        }),
      ),
      entry,
    );
    let text: string;
    try {
      text = value === undefined || value === null ? 'null' : toJsonText(value);
    } catch (err) {
      // A result that cannot be stored fails its job without retry (DEVELOPERS.md, bad input).
      return failFinal(storedError(err, 'UnstorableResult'), 'result cannot be stored');
    }
    return complete(entry, 'succeeded', text, null, 0);
  } catch (err) {
    // Stopping gracefully, or giving up: the row goes back uncharged (seed 001, "Shutdown").
    if (entry.abortCause === 'shutdown' || entry.abortCause === 'fatal') return complete(entry, 'handed_back', null, null, 0);
    const aborted = abortError(entry, timeoutMs);
    if (!aborted && !isError(err)) {
      // A thrown non-Error carries no name, message or stack to store: the job fails without
      // retry, with a readable error describing the value (issue 4).
      return failFinal(storedError(err), 'handler threw a non-Error value');
    }
    if (!aborted && isInstance(err, UnstorableStepResultError)) {
      return failFinal(storedError(err), 'step result cannot be stored');
    }
    // Logged as stored plus the error's own simple fields, under `error` (bounded: pino's `err`
    // serialiser would write all of it, e.g. one 314 MB line for an AggregateError of a million
    // errors, 13.9 s on the event loop; adversarial trial).
    const stored = storedError(aborted ?? err);
    return failure(entry, definition, attempt, stored, () => loggedError(aborted ?? err, stored), jobLogger);
  } finally {
    timeout.cancel();
  }
}

/**
 * The completion of a charged failed attempt: retried after the definition's backoff while the
 * job has attempts left, else final. A job's limit is its own maxAttempts, else its definition's,
 * else 25 (PIPELINE.maxAttempts; migration 0004): the rule acta.complete_executions applies to a
 * 'failed' outcome, from the same row. Logged with `logged()` (the error as logged) and the limit:
 * a retried attempt at warn, "attempt failed"; the last one at error, "job failed: no attempts
 * left" (test/faults/completion.test.ts holds both).
 */
function failure(entry: Entry, definition: Definition, attempt: number, stored: Record<string, unknown>, logged: () => Record<string, unknown>, jobLogger: () => Logger): Completion {
  const maxAttempts = entry.row.maxAttempts ?? definition.maxAttempts ?? PIPELINE.maxAttempts;
  const lastAttempt = attempt >= maxAttempts;
  // `attempt` is a binding of the job's logger already.
  if (lastAttempt) safeLog(() => jobLogger().error({ error: logged(), maxAttempts }, 'job failed: no attempts left'));
  else safeLog(() => jobLogger().warn({ error: logged(), maxAttempts }, 'attempt failed'));
  let delayMs = 0;
  if (!lastAttempt) {
    try {
      delayMs = backoffMs(definition.backoff, attempt);
    } catch (backoffErr) {
      // A definition's backoff function that throws: its default backoff instead (the job is
      // still retried; the worker goes on).
      delayMs = backoffMs(undefined, attempt);
      safeLog(() => jobLogger().error({ error: storedError(backoffErr), delayMs }, 'backoff function threw: retrying after the default backoff'));
    }
  }
  return complete(entry, lastAttempt ? 'failed_final' : 'failed', null, storedErrorText(stored), delayMs);
}

/**
 * An Error of this realm or of another (`vm` contexts, whose Errors are not `instanceof` this
 * realm's Error: a TypeError thrown in one was stored as a thrown non-Error and not retried;
 * adversarial trial); false for a value on which the test throws (e.g. a revoked Proxy).
 */
function isError(err: unknown): err is Error {
  try {
    return err instanceof Error || types.isNativeError(err);
  } catch {
    return false;
  }
}

/** `value instanceof type`, false where the test throws (a Proxy whose getPrototypeOf trap throws). */
function isInstance(value: unknown, type: abstract new (...args: never[]) => unknown): boolean {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

/** Runs a log call; if it throws (a user's error whose fields throw when read), runs `fallback`, and swallows what that throws. */
function safeLog(log: () => void, fallback?: () => void): void {
  try {
    log();
  } catch {
    try {
      fallback?.();
    } catch {
      /* nothing left to log it with */
    }
  }
}

/** The `handed_back` completion of an entry that never reached a handler (Ready at once, uncharged). */
export function handBackCompletion(entry: Entry): Completion {
  return complete(entry, 'handed_back', null, null, 0);
}

function complete(entry: Entry, outcome: CompletionRow['outcome'], result: string | null, error: string | null, retryDelayMs: number): Completion {
  return {
    entry,
    row: { id: entry.row.id, execution: entry.row.execution, outcome, result, error, retryDelayMs },
    // UTF-8 bytes, as the bound is: string length counts UTF-16 units, a third of the bytes of
    // CJK text (adversarial trial: a "4 MiB" batch of 5.72 MiB).
    bytes: (result === null ? 0 : Buffer.byteLength(result, 'utf8')) + (error === null ? 0 : Buffer.byteLength(error, 'utf8')),
  };
}

/** Resolves or rejects with `work`, or rejects with the cause as soon as `entry` is aborted (a handler that ignores its signal is not waited for; its late write is fenced out). */
function untilAborted<T>(work: Promise<T>, entry: Entry): Promise<T> {
  if (entry.abortCause !== undefined) return Promise.reject(entry.abortCause);
  return new Promise<T>((resolve, reject) => {
    entry.onAbort = reject;
    work.then(
      (v) => {
        entry.onAbort = undefined;
        resolve(v);
      },
      (e) => {
        entry.onAbort = undefined;
        reject(e);
      },
    );
  });
}

function abortError(entry: Entry, timeoutMs: number): Error | undefined {
  switch (entry.abortCause) {
    case 'timeout':
      return new AttemptTimeoutError(`attempt exceeded its timeout of ${timeoutMs} ms`);
    case 'deadline':
      return new AttemptTimeoutError('attempt deadline passed: its lease was not renewed in time');
    case 'lost':
      return new AttemptCancelledError('attempt cancelled: its lease was lost (recovered or fenced)');
    default:
      return undefined;
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
function storedError(err: unknown, name?: string): Record<string, unknown> {
  try {
    return errorFields(err, name);
  } catch {
    // Not expected: every read of `err` is guarded. But this must not throw, or the attempt's
    // completion is never made (a Proxy of an Error whose traps throw only on a later call;
    // adversarial trial).
    return unreadable(name);
  }
}

/**
 * The error of an attempt as the worker logs it: storedError's fields, plus the error's own
 * enumerable fields of simple values (strings cut at 1,000 characters, finite numbers, booleans;
 * at most 20 of the first 100, names of at most 100 characters), e.g. a pg error's `detail` and `constraint`, an HTTP error's `status`, a system
 * error's `syscall` and `port`, which the stored form leaves out (a review). Never throws.
 */
function loggedError(err: unknown, stored: Record<string, unknown>): Record<string, unknown> {
  const own: Record<string, unknown> = {};
  if (isError(err) && !types.isProxy(err)) {
    // (A Proxy's traps would list every key of its target: 2.9 s for one of a typed array, a review.)
    try {
      let n = 0;
      let looked = 0;
      for (const key in err) {
        // At most 20 kept of the first 100 looked at; names of at most 100 characters (a review:
        // one field named by 1e8 characters made a 100 MB line).
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

/** storedError's object as the JSON text stored. Never throws. */
function storedErrorText(fields: Record<string, unknown>, name?: string): string {
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
 * description at 1,000, `describe`): at most 24 nested errors and 12 short markers, under 300 Ki
 * characters (3.4 MB of UTF-8 at worst, control characters escaped) beside
 * the error's own message and stack, whatever the handler threw (a cycle of causes, an `errors`
 * array with its own `slice`, a Proxy). acta's own choice; a completion larger than the 4 MiB
 * batch bound is written alone (shared/DESIGN.md, finalizer).
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
  if (!isError(value)) return { name: 'NonErrorCause', message: storable(describe(value), max) };
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
      message: storable(stringField(err, 'message') ?? describe(err)),
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
    out = { name: name ?? 'NonErrorThrown', message: storable(`handler threw a non-Error value (${type}): ${describe(err)}`) };
  }
  return out;
}

/** The longest description `describe` gives, in characters (acta's own bound: a description names a value, it does not store it). */
const DESCRIBE_MAX_CHARS = 1_000;
/** Nesting `describe` follows before it writes `"[…]"`. */
const DESCRIBE_MAX_DEPTH = 50;
/**
 * Members, elements and objects `describe` looks at, written or left out, before it stops:
 * members JSON leaves out (undefined values, functions) write nothing, and 400 visits of one
 * object of 10,000 undefined members took 2.1 s (a review). acta's own bound.
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

/** The largest bigint `describe` writes in digits (acta's own bound: 1n << 4_000_000n took 1.2 s to write out, a review). */
const BIGINT_MAX_DIGITS = 10n ** 1_000n;

/** `10n`, or `<a bigint of over 1000 digits>` (the comparison is linear in its size; its decimal text is not). */
function bigintText(v: bigint): string {
  return v >= BIGINT_MAX_DIGITS || v <= -BIGINT_MAX_DIGITS ? '<a bigint of over 1000 digits>' : `${v}n`;
}

/**
 * The best short string form of any value, at most DESCRIBE_MAX_CHARS characters (and `…` where
 * cut). Never throws, and its time is bounded by DESCRIBE_MAX_STEPS (beyond listing each object's
 * own keys once, which V8 does whole before the first is read). A string as it is, a bigint as
 * bigintText, binary data as binaryName, a Proxy as `[a Proxy]` (its traps would run per key: 32 s
 * for one of a 5 MB typed array, a review); anything else as the start of its JSON form (toJSON
 * honoured, a boxed primitive unwrapped, functions and symbols left out, a cycle as "[Circular]",
 * keys cut at 1,000 characters), written by a walk that stops at the bound: serialising a whole
 * value first took 1.4 s for a 20 MB Buffer cause and 47 s for an AggregateError of ten (reviews),
 * and up to 24 values are described per error. An object whose reading throws (a getter, a
 * revoked Proxy) is described by what was written before, else by its tag.
 */
export function describe(value: unknown): string {
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
  /** Own enumerable keys per object, listed once however often the object is met (a review: 400 visits of one such list took 17 s). */
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
    // Not String(value): an array's would join all of its elements (a review: 2e6 bytes).
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
