import pino from 'pino';
import { BehaviorSubject, type Observable, Subject } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import type { CompletionAck, CompletionRow } from '../src/db/types';
import type { Completion } from '../src/worker/executor';
import { Finalizer, isContentError, type WrittenBatch } from '../src/worker/finalizer';
import type { Entry } from '../src/worker/registry';

type Cold = <T>(marbles: string, values?: Record<string, T>, error?: unknown) => Observable<T>;

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));
const MiB = 1024 * 1024;
const ALMOST_ONE = 1 - Number.EPSILON;

const completion = (id: string, bytes = 0, outcome: CompletionRow['outcome'] = 'succeeded'): Completion => ({
  entry: {} as Entry,
  row: { id, execution: 1, outcome, result: outcome === 'succeeded' ? '{}' : null, error: null, retryDelayMs: 0 },
  bytes,
});
const ack = (row: CompletionRow): CompletionAck => ({
  id: row.id,
  execution: row.execution,
  status: row.outcome === 'failed_final' ? 'failed' : 'succeeded',
});
const ids = (n: number, prefix = 'j') => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);
const transient = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
const refused = () => Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' });

interface Options {
  executors?: number;
  /** ms each call takes (default 3). */
  callMs?: number;
  /** Decides the error of a call, or undefined for success. */
  fail?: (rows: CompletionRow[], callNumber: number) => unknown;
  random?: () => number;
  /** Whether completions may still come, as the worker reports it (default: the option left out). */
  moreComing$?: Observable<boolean>;
  /** Signs that the database is back (default: the option left out). */
  retryNow$?: Observable<unknown>;
}

/**
 * A finalizer in virtual time: the write is a cold observable taking `callMs`, failing as `fail`
 * says; every call is logged with its time and rows; a real pino logger writes into `logs`.
 */
function harness(scheduler: TestScheduler, cold: Cold, options: Options = {}) {
  const calls: { at: number; rows: CompletionRow[] }[] = [];
  const logs: { level: number; msg: string; retry?: number; delayMs?: number; jobId?: string }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => logs.push(JSON.parse(line)) });
  const written: { at: number; batch: string[]; acks: CompletionAck[] }[] = [];
  const lead = '-'.repeat(options.callMs ?? 3);
  const finalizer = new Finalizer({
    executors: options.executors ?? 2,
    logger,
    scheduler,
    random: options.random ?? (() => 0.5),
    moreComing$: options.moreComing$,
    retryNow$: options.retryNow$,
    write: (rows) => {
      calls.push({ at: scheduler.now(), rows });
      const err = options.fail?.(rows, calls.length);
      if (err !== undefined) return cold<CompletionAck[]>(`${lead}#`, undefined, err);
      return cold<CompletionAck[]>(`${lead}(a|)`, { a: rows.map(ack) });
    },
    onWritten: (batch, acks) => written.push({ at: scheduler.now(), batch: batch.map((c) => c.row.id), acks }),
  });
  const callLog = () => calls.map((c) => [c.at, c.rows.length]);
  // The worker's wiring: the completions as a stream, the finalizer as its operator.
  const completions = new Subject<Completion>();
  const wired = {
    push: (c: Completion) => completions.next(c),
    close: () => completions.complete(),
    written$: completions.pipe(finalizer.write),
    abandon: () => finalizer.abandon(),
    intakeOpen$: finalizer.intakeOpen$,
    get backlog() {
      return finalizer.backlog;
    },
  };
  return { finalizer: wired, calls, callLog, logs, written };
}

/** Pushes `completions` into the finalizer at virtual time `at`. */
const pushAt = (scheduler: TestScheduler, finalizer: { push(c: Completion): void }, at: number, completions: Completion[]) =>
  scheduler.schedule(() => completions.forEach((c) => finalizer.push(c)), at);

describe('Finalizer', () => {
  it('writes a lone completion at once, in the same frame, and reports it after the call lands', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      const h = harness(scheduler, cold);
      pushAt(scheduler, h.finalizer, 5, [completion('a')]);
      expectObservable(h.finalizer.written$, '^ 100ms !').toBe('8ms w', {
        w: { batch: [completion('a')], acks: [{ id: 'a', execution: 1, status: 'succeeded' }] } as WrittenBatch,
      });
      flush();
      expect(h.callLog()).toEqual([[5, 1]]);
      expect(h.written).toEqual([{ at: 8, batch: ['a'], acks: [{ id: 'a', execution: 1, status: 'succeeded' }] }]);
      expect(h.finalizer.backlog).toBe(0);
    });
  });

  it('batches by count: at most 128 completions per call, a full backlog without waiting', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold);
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('first')]);
      pushAt(scheduler, h.finalizer, 1, ids(300).map((id) => completion(id)));
      flush();
      s.unsubscribe();
      expect(h.callLog()).toEqual([
        [0, 1],
        [3, 128], // the backlog of 300 fills a batch: no window
        [6, 128],
        [59, 44], // 44 left: a backlog that does not fill a batch waits the 50 ms window (9 + 50)
      ]);
      expect(h.calls.flatMap((c) => c.rows.map((r) => r.id))).toEqual(['first', ...ids(300)]);
    });
  });

  it('batches by bytes: at most 4 MiB of results per call, and a larger result alone', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold);
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('first', 10)]);
      pushAt(scheduler, h.finalizer, 1, [
        completion('a', 3 * MiB),
        completion('b', MiB), // a + b = exactly 4 MiB: one call
        completion('c', 2 * MiB),
        completion('big', 5 * MiB), // over the bound: alone
        completion('d', 100),
      ]);
      flush();
      s.unsubscribe();
      expect(h.calls.map((c) => [c.at, c.rows.map((r) => r.id)])).toEqual([
        [0, ['first']],
        [3, ['a', 'b']],
        [6, ['c']],
        [9, ['big']],
        [12, ['d']],
      ]);
    });
  });

  it('waits the 50 ms window only when its first read found a backlog, and writes early when 128 fill it', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold);
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      pushAt(scheduler, h.finalizer, 1, [completion('b'), completion('c')]); // backlog at 3: window to 53
      pushAt(scheduler, h.finalizer, 100, [completion('d')]); // lone: at once
      pushAt(scheduler, h.finalizer, 101, [completion('e'), completion('f')]); // backlog at 103: window…
      pushAt(scheduler, h.finalizer, 120, ids(126).map((id) => completion(id))); // …filled to 128 at 120
      flush();
      s.unsubscribe();
      expect(h.callLog()).toEqual([
        [0, 1],
        [53, 2],
        [100, 1],
        [120, 128],
      ]);
    });
  });

  it('skips or ends the window when nothing more can come (the end of a backlog): with an arrival, or alone', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const more = new BehaviorSubject(true);
      const h = harness(scheduler, cold, { moreComing$: more });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      pushAt(scheduler, h.finalizer, 1, [completion('b'), completion('c')]); // backlog at 3, more may come: window…
      scheduler.schedule(() => {
        h.finalizer.push(completion('d')); // …the last one arrives at 10: written then, not at 53
        more.next(false);
      }, 10);
      pushAt(scheduler, h.finalizer, 100, [completion('e')]);
      pushAt(scheduler, h.finalizer, 101, [completion('f'), completion('g')]); // backlog at 103, nothing more: no window
      scheduler.schedule(() => more.next(true), 150);
      pushAt(scheduler, h.finalizer, 200, [completion('h')]);
      pushAt(scheduler, h.finalizer, 201, [completion('i'), completion('j')]); // backlog at 203: window…
      scheduler.schedule(() => more.next(false), 210); // …e.g. a claim came back empty at 210: written then, not at 253
      flush();
      s.unsubscribe();
      expect(h.callLog()).toEqual([
        [0, 1],
        [10, 3],
        [100, 1],
        [103, 2],
        [200, 1],
        [210, 2],
      ]);
    });
  });

  it('repeats a failing write 1 s, 2 s, 4 s, 8 s, 16 s, 30 s, 30 s apart: a warning for three tries, then errors', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold, { fail: (_rows, n) => (n <= 7 ? transient() : undefined) });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      flush();
      s.unsubscribe();
      const starts = [0];
      for (const ms of [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]) starts.push(starts[starts.length - 1] + 3 + ms);
      expect(h.calls.map((c) => c.at)).toEqual(starts);
      expect(h.written.map((w) => w.at)).toEqual([starts[7] + 3]);
      const repeats = h.logs.filter((l) => l.msg === 'completion write failed; repeating');
      expect(repeats.map((l) => [l.level, l.retry, l.delayMs])).toEqual([
        [40, 1, 1_000],
        [40, 2, 2_000],
        [40, 3, 4_000],
        [50, 4, 8_000],
        [50, 5, 16_000],
        [50, 6, 30_000],
        [50, 7, 30_000],
      ]);
    });
  });

  it('jitters the repeat by ±25 %: random 0 and random → 1', () => {
    for (const [random, delays] of [
      [0, [750, 1_500, 3_000, 6_000, 12_000, 22_500, 22_500]],
      [ALMOST_ONE, [1_250, 2_500, 5_000, 10_000, 20_000, 37_500, 37_500]],
    ] as const) {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { random: () => random, fail: (_rows, n) => (n <= 7 ? transient() : undefined) });
        const s = h.finalizer.written$.subscribe();
        pushAt(scheduler, h.finalizer, 0, [completion('a')]);
        flush();
        s.unsubscribe();
        const gaps = h.calls.slice(1).map((c, i) => c.at - h.calls[i].at - 3);
        expect(gaps).toEqual(delays);
      });
    }
  });

  it('repeats the whole batch, in one call, after a transient error (57P01)', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold, { fail: (_rows, n) => (n === 2 ? transient() : undefined) });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('x')]);
      pushAt(scheduler, h.finalizer, 1, ['a', 'b', 'c', 'd'].map((id) => completion(id)));
      flush();
      s.unsubscribe();
      expect(h.calls.map((c) => [c.at, c.rows.map((r) => r.id)])).toEqual([
        [0, ['x']],
        [53, ['a', 'b', 'c', 'd']],
        [1_056, ['a', 'b', 'c', 'd']], // 53 + 3 + 1000
      ]);
      expect(h.written.map((w) => w.batch)).toEqual([['x'], ['a', 'b', 'c', 'd']]);
      expect(h.logs.some((l) => /cannot be stored|content/.test(l.msg))).toBe(false);
    });
  });

  it('repeats a waiting write at once when the database is known to be back (retryNow$), not after its back-off', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, hot, flush }) => {
      const h = harness(scheduler, cold, { fail: (_rows, n) => (n <= 4 ? transient() : undefined), retryNow$: hot('9000ms b') });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      flush();
      s.unsubscribe();
      // Tries at 0, 1 003, 3 006, 7 009 (1, 2, 4 s after each 3 ms failure); the 8 s wait from 7 012 is cut at 9 000.
      expect(h.callLog()).toEqual([
        [0, 1],
        [1_003, 1],
        [3_006, 1],
        [7_009, 1],
        [9_000, 1],
      ]);
      expect(h.written.map((w) => w.batch)).toEqual([['a']]);
    });
  });

  it('bisects a batch refused for its content (22P05): the clean completions land, the bad one becomes failed_final', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      // The database refuses any call that carries X's original row.
      const h = harness(scheduler, cold, { fail: (rows) => (rows.some((r) => r.id === 'X' && r.outcome === 'succeeded') ? refused() : undefined) });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('first')]);
      pushAt(scheduler, h.finalizer, 1, ['a', 'b', 'X', 'd'].map((id) => completion(id)));
      flush();
      s.unsubscribe();
      expect(h.calls.map((c) => [c.at, c.rows.map((r) => `${r.id}:${r.outcome}`)])).toEqual([
        [0, ['first:succeeded']],
        [53, ['a:succeeded', 'b:succeeded', 'X:succeeded', 'd:succeeded']],
        [56, ['a:succeeded', 'b:succeeded']], // no back-off: the refusal is about the rows
        [59, ['X:succeeded', 'd:succeeded']],
        [62, ['X:succeeded']],
        [65, ['X:failed_final']],
        [68, ['d:succeeded']],
      ]);
      const rewritten = h.calls[5].rows[0];
      expect(rewritten).toMatchObject({ id: 'X', outcome: 'failed_final', result: null, retryDelayMs: 0 });
      expect(JSON.parse(rewritten.error!)).toMatchObject({ name: 'UnstorableOutcome', code: '22P05' });
      // One batch reported, its acks in the batch's order.
      expect(h.written).toEqual([
        { at: 3, batch: ['first'], acks: [{ id: 'first', execution: 1, status: 'succeeded' }] },
        {
          at: 71,
          batch: ['a', 'b', 'X', 'd'],
          acks: [
            { id: 'a', execution: 1, status: 'succeeded' },
            { id: 'b', execution: 1, status: 'succeeded' },
            { id: 'X', execution: 1, status: 'failed' },
            { id: 'd', execution: 1, status: 'succeeded' },
          ],
        },
      ]);
      const stored = h.logs.filter((l) => l.msg === 'outcome cannot be stored: job fails without retry');
      expect(stored.map((l) => [l.level, l.jobId])).toEqual([[50, 'X']]);
    });
  });

  it('bisects a batch the client cannot encode (RangeError "Invalid string length" from 2^27 characters or more): it is not repeated as it is', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      // What node-postgres throws when the batch's quoted array literal would pass V8's longest
      // string (a result of ~500 million characters): any call carrying X, up to the 20th call (so
      // that a finalizer that repeats it ends, and fails the test below). X's result is 2^27
      // characters: the least for which the error is taken as the rows' own.
      const tooLong = () => new RangeError('Invalid string length');
      const h = harness(scheduler, cold, { fail: (rows, n) => (n <= 20 && rows.some((r) => r.id === 'X' && r.outcome === 'succeeded') ? tooLong() : undefined) });
      const s = h.finalizer.written$.subscribe();
      const x = completion('X');
      x.row.result = 'x'.repeat(2 ** 27);
      pushAt(scheduler, h.finalizer, 0, [completion('first')]);
      pushAt(scheduler, h.finalizer, 1, [completion('a'), x, completion('c')]);
      flush();
      s.unsubscribe();
      expect(h.calls.map((c) => [c.at, c.rows.map((r) => `${r.id}:${r.outcome}`).join(',')])).toEqual([
        [0, 'first:succeeded'],
        [53, 'a:succeeded,X:succeeded,c:succeeded'],
        [56, 'a:succeeded,X:succeeded'],
        [59, 'a:succeeded'],
        [62, 'X:succeeded'],
        [65, 'X:failed_final'],
        [68, 'c:succeeded'],
      ]);
      expect(JSON.parse(h.calls[5].rows[0].error!)).toMatchObject({ name: 'UnstorableOutcome', message: 'Invalid string length' });
      expect(h.written.map((w) => [w.at, w.batch.join(''), w.acks.map((a) => a.status).join(',')])).toEqual([
        [3, 'first', 'succeeded'],
        [71, 'aXc', 'succeeded,failed,succeeded'],
      ]);
      expect(h.logs.some((l) => l.msg === 'completion write failed; repeating')).toBe(false);
      // Another RangeError is not the rows' own, whatever their size.
      expect(isContentError(new RangeError('Maximum call stack size exceeded'), [x.row])).toBe(false);
    });
  });

  it('repeats, and does not bisect, a batch that met another RangeError, or "Invalid string length" from fewer than 2^27 characters', () => {
    // A stack overflow in a Db wrapper, a failed allocation under memory pressure, or a string
    // error the batch's size cannot explain: a later try may not meet it. Taken as the rows' own, a
    // lone completion whose handler succeeded was stored failed_final.
    for (const err of [new RangeError('Maximum call stack size exceeded'), new RangeError('Array buffer allocation failed'), new RangeError('Invalid string length')]) {
      const scheduler = newScheduler();
      scheduler.run(({ cold, flush }) => {
        const h = harness(scheduler, cold, { fail: (_rows, n) => (n <= 2 ? err : undefined) });
        const s = h.finalizer.written$.subscribe();
        const big = completion('big');
        big.row.result = 'x'.repeat(2 ** 27 - 5); // with a's and c's '{}': one character short
        pushAt(scheduler, h.finalizer, 0, [completion('a'), big, completion('c')]);
        flush();
        s.unsubscribe();
        expect(h.calls.map((c) => [c.at, c.rows.map((r) => `${r.id}:${r.outcome}`).join(',')])).toEqual([
          [0, 'a:succeeded'],
          [1_003, 'a:succeeded'],
          [3_006, 'a:succeeded'],
          [3_059, 'big:succeeded,c:succeeded'], // the backlog's 50 ms window
        ]);
        expect(isContentError(err, [completion('a').row, big.row, completion('c').row])).toBe(false);
      });
    }
  });

  it('never writes a part that landed again: after a bisection only the failing call repeats', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      // [a,b,X,d] refused; [a,b] lands; [X,d] refused; [X] refused; the replacement of X fails
      // transiently once, then lands; then [d].
      const h = harness(scheduler, cold, {
        fail: (rows, n) => {
          if (rows.some((r) => r.id === 'X' && r.outcome === 'succeeded')) return refused();
          if (rows[0].id === 'X' && n === 6) return transient();
          return undefined;
        },
      });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('first')]);
      pushAt(scheduler, h.finalizer, 1, ['a', 'b', 'X', 'd'].map((id) => completion(id)));
      flush();
      s.unsubscribe();
      expect(h.calls.map((c) => [c.at, c.rows.map((r) => `${r.id}:${r.outcome}`).join(',')])).toEqual([
        [0, 'first:succeeded'],
        [53, 'a:succeeded,b:succeeded,X:succeeded,d:succeeded'],
        [56, 'a:succeeded,b:succeeded'],
        [59, 'X:succeeded,d:succeeded'],
        [62, 'X:succeeded'],
        [65, 'X:failed_final'],
        [1_068, 'X:failed_final'], // repeated after 1 s; a and b are not written again
        [1_071, 'd:succeeded'],
      ]);
      expect(h.written.map((w) => [w.at, w.batch.join(''), w.acks.map((a) => a.status).join(',')])).toEqual([
        [3, 'first', 'succeeded'],
        [1_074, 'abXd', 'succeeded,succeeded,failed,succeeded'],
      ]);
    });
  });

  it('repeats, and does not bisect, a batch refused for a reason that is not its content (e.g. 42883, a missing function)', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const missing = Object.assign(new Error('function acta.complete_executions does not exist'), { code: '42883' });
      const h = harness(scheduler, cold, { fail: (rows, n) => (rows.length > 1 && n <= 4 ? missing : undefined) });
      const s = h.finalizer.written$.subscribe();
      pushAt(scheduler, h.finalizer, 0, [completion('first')]);
      pushAt(scheduler, h.finalizer, 1, ['a', 'b', 'c'].map((id) => completion(id)));
      flush();
      s.unsubscribe();
      expect(h.callLog()).toEqual([
        [0, 1],
        [53, 3],
        [1_056, 3],
        [3_059, 3],
        [7_062, 3],
      ]);
      expect(h.written.map((w) => [w.at, w.batch.join('')])).toEqual([
        [3, 'first'],
        [7_065, 'abc'],
      ]);
      expect(h.calls.every((c) => c.rows.every((r) => r.outcome === 'succeeded'))).toBe(true);
      expect(isContentError(missing)).toBe(false);
      expect(isContentError(refused())).toBe(true);
      expect(isContentError(Object.assign(new Error(), { code: '54000' }))).toBe(true);
      expect(isContentError(transient())).toBe(false);
      expect(isContentError(new Error('no code'))).toBe(false);
    });
  });

  it('intake stops when the channel holds 128 + N completions not yet written, and resumes when it drains', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, flush }) => {
      const h = harness(scheduler, cold, { executors: 2, callMs: 100 }); // capacity 130
      const s = h.finalizer.written$.subscribe();
      expectObservable(h.finalizer.intakeOpen$, '^ 500ms !').toBe('t-f-------------------------------------------------------------------------------------------------t', {
        t: true,
        f: false,
      });
      const backlog: number[] = [];
      pushAt(scheduler, h.finalizer, 0, [completion('first')]); // written at once, lands at 100
      pushAt(scheduler, h.finalizer, 1, ids(128).map((id) => completion(id))); // 129 not yet written: open
      scheduler.schedule(() => backlog.push(h.finalizer.backlog), 1);
      pushAt(scheduler, h.finalizer, 2, [completion('last')]); // 130: full
      scheduler.schedule(() => backlog.push(h.finalizer.backlog), 2);
      scheduler.schedule(() => backlog.push(h.finalizer.backlog), 101);
      flush();
      s.unsubscribe();
      expect(backlog).toEqual([129, 130, 129]);
      expect(h.callLog()).toEqual([
        [0, 1],
        [100, 128],
        [200, 1],
      ]);
    });
  });

  it('close() writes everything left without a window and then completes written$', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold);
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      pushAt(scheduler, h.finalizer, 1, [completion('b'), completion('c')]);
      scheduler.schedule(() => h.finalizer.close(), 2);
      const done: number[] = [];
      h.finalizer.written$.subscribe({ complete: () => done.push(scheduler.now()) });
      flush();
      expect(h.callLog()).toEqual([
        [0, 1],
        [3, 2], // no 50 ms window: the channel is closed
      ]);
      expect(done).toEqual([6]);
      expect(h.written.map((w) => w.batch.join(''))).toEqual(['a', 'bc']);
    });
  });

  it('abandon() stops repeating a failing write and completes written$ at once', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, flush }) => {
      const h = harness(scheduler, cold, { fail: () => transient() });
      const done: number[] = [];
      h.finalizer.written$.subscribe({ complete: () => done.push(scheduler.now()) });
      pushAt(scheduler, h.finalizer, 0, [completion('a')]);
      scheduler.schedule(() => h.finalizer.close(), 1);
      scheduler.schedule(() => h.finalizer.abandon(), 5_000);
      flush();
      expect(done).toEqual([5_000]);
      expect(h.callLog()).toEqual([
        [0, 1],
        [1_003, 1],
        [3_006, 1],
      ]);
      expect(h.written).toEqual([]);
      expect(h.finalizer.backlog).toBe(1);
    });
  });
});
