import { Observable, of } from 'rxjs';
import { TestScheduler } from 'rxjs/testing';
import { bufferBounded, type BufferBoundedConfig } from '../../operators';

type Cold = <T = string>(marbles: string, values?: Record<string, T>, error?: unknown) => Observable<T>;

const newScheduler = () => new TestScheduler((actual, expected) => expect(actual).toEqual(expected));

/** A serial writer whose every write takes `ms` and then emits its batch joined; records when each write started. */
function recordingWriter(scheduler: TestScheduler, cold: Cold, ms: number) {
  const writes: { at: number; batch: string[]; write: Observable<string> }[] = [];
  const write = (batch: string[]) => {
    const w = cold(`${'-'.repeat(ms)}(x|)`, { x: batch.join('') });
    writes.push({ at: scheduler.now(), batch: [...batch], write: w });
    return w;
  };
  const starts = () => writes.map((w) => [w.at, w.batch.join('')]);
  return { writes, write, starts };
}

const config = (scheduler: TestScheduler, over: Partial<BufferBoundedConfig<string>>): BufferBoundedConfig<string> => ({
  maxCount: 3,
  maxBytes: Infinity,
  maxWaitMs: 5,
  scheduler,
  ...over,
});

describe('bufferBounded', () => {
  it('the doc-comment diagram: lone items go at once, a backlog waits up to maxWaitMs, a full batch or completion ends the wait', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const source = hot('abc-d----efg---------hij--|');
      const sourceSub = '^-------------------------!';
      const expected = '  ---A---B----E-------F---H----(I|)';
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 3, maxWaitMs: 5 })))).toBe(expected, {
        A: 'a',
        B: 'bcd',
        E: 'e',
        F: 'fg',
        H: 'h',
        I: 'ij',
      });
      expectSubscriptions(source.subscriptions).toBe(sourceSub);
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [4, 'bcd'], // window opened at 3 (backlog b,c); d filled the batch at 4
        [9, 'e'],
        [17, 'fg'], // window 12..17 ran out
        [21, 'h'],
        [26, 'ij'], // window from 24; the completion at 26 ends it
      ]);
    });
  });

  it('bounds a batch by count: a backlog beyond maxCount goes out in full batches, back to back, without a window', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const source = hot('a(bcdefg)');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 3, maxWaitMs: 50 })))).toBe('---A--B--C', {
        A: 'a',
        B: 'bcd',
        C: 'efg',
      });
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [3, 'bcd'],
        [6, 'efg'],
      ]);
    });
  });

  it('bounds a batch by bytes: the batch stops before the item that would cross maxBytes, and a byte-full backlog does not wait', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const bytes: Record<string, number> = { a: 4, b: 4, c: 4, d: 3 };
      const source = hot('a(bcd)');
      expectObservable(
        source.pipe(bufferBounded(write, config(scheduler, { maxCount: 10, maxBytes: 10, maxWaitMs: 50, sizeOf: (x) => bytes[x] }))),
      ).toBe('---A--B--C', { A: 'a', B: 'bc', C: 'd' });
      flush();
      // b,c,d = 11 bytes ≥ 10: the batch is full, so no window; b+c = 8, and d would make 11.
      expect(starts()).toEqual([
        [0, 'a'],
        [3, 'bc'],
        [6, 'd'],
      ]);
    });
  });

  it('writes an item larger than maxBytes alone: after others, before others, and to an idle writer', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const bytes: Record<string, number> = { a: 2, b: 2, X: 15, c: 2, Y: 15 };
      const source = hot('a(bXc)---------Y');
      expectObservable(
        source.pipe(bufferBounded(write, config(scheduler, { maxCount: 10, maxBytes: 10, maxWaitMs: 50, sizeOf: (x) => bytes[x] }))),
      ).toBe('---a--b--X--c-----Y');
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [3, 'b'],
        [6, 'X'],
        [9, 'c'],
        [15, 'Y'],
      ]);
    });
  });

  it('opens the window only when the first read found a backlog, and writes as soon as the batch fills by count', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const source = hot('abc------d---------e');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 4, maxWaitMs: 50 })))).toBe(
        '---A------------------B',
        { A: 'a', B: 'bcde' },
      );
      flush();
      // The window opened at 3 (b,c waiting) would run to 53; e fills the batch of 4 at 19.
      expect(starts()).toEqual([
        [0, 'a'],
        [19, 'bcde'],
      ]);
    });
  });

  it('writes as soon as the batch fills by bytes during the window', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const bytes: Record<string, number> = { a: 1, b: 2, c: 2, d: 7 };
      const source = hot('abc-------d');
      expectObservable(
        source.pipe(bufferBounded(write, config(scheduler, { maxCount: 10, maxBytes: 10, maxWaitMs: 50, sizeOf: (x) => bytes[x] }))),
      ).toBe('---A---------B--D', { A: 'a', B: 'bc', D: 'd' });
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [10, 'bc'], // b+c+d = 11 ≥ 10 ends the window at 10; d does not fit and goes next
        [13, 'd'],
      ]);
    });
  });

  it('writes a backlog that does not fill when the window runs out, exactly maxWaitMs after the read', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush, time }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const maxWaitMs = time('-----|'); // 5
      const source = hot('abc');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 10, maxWaitMs })))).toBe('---A-------B', {
        A: 'a',
        B: 'bc',
      });
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [8, 'bc'],
      ]);
    });
  });

  it('an error of moreComing$ goes downstream at once, as the source\'s does', () => {
    // Was: moreComing$ was subscribed without an error handler, so its error went to rxjs's
    // unhandled-error path (thrown from a timer: a crash in Node) and the output ran on.
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable }) => {
      const writer = recordingWriter(scheduler, cold, 3);
      const out = hot('abc------').pipe(bufferBounded(writer.write, config(scheduler, { maxCount: 10, maxWaitMs: 50, moreComing$: hot('t----#', { t: true }, 'gone') })));
      expectObservable(out).toBe('---a-#', { a: 'a' }, 'gone');
    });
  });

  it('does not open a window when moreComing$ says nothing else can come, and ends one as soon as it says so (with an arrival, or alone)', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, flush }) => {
      // Never more: the backlog b,c goes as soon as the writer is free; d, alone, after it.
      const never = recordingWriter(scheduler, cold, 3);
      hot('abc-d').pipe(bufferBounded(never.write, config(scheduler, { maxCount: 10, moreComing$: of(false) }))).subscribe();
      // More until 4: the window opens at 3 and ends when d arrives at 4, not at 8.
      const until4 = recordingWriter(scheduler, cold, 3);
      hot('abc-d').pipe(bufferBounded(until4.write, config(scheduler, { maxCount: 10, moreComing$: hot('t---f', { t: true, f: false }) }))).subscribe();
      // More until 6: the change at 6 ends the window with no item arriving.
      const rechecked = recordingWriter(scheduler, cold, 3);
      hot('abc-d')
        .pipe(bufferBounded(rechecked.write, config(scheduler, { maxCount: 10, moreComing$: hot('t-----f', { t: true, f: false }) })))
        .subscribe();
      // Always (the default): the window runs out at 8.
      const always = recordingWriter(scheduler, cold, 3);
      hot('abc-d').pipe(bufferBounded(always.write, config(scheduler, { maxCount: 10 }))).subscribe();
      flush();
      expect(never.starts()).toEqual([
        [0, 'a'],
        [3, 'bc'],
        [6, 'd'],
      ]);
      expect(until4.starts()).toEqual([
        [0, 'a'],
        [4, 'bcd'],
      ]);
      expect(rechecked.starts()).toEqual([
        [0, 'a'],
        [6, 'bcd'],
      ]);
      expect(always.starts()).toEqual([
        [0, 'a'],
        [8, 'bcd'],
      ]);
    });
  });

  it('never holds a lone item: not when the writer is idle, not when it is the only one left after a write', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const source = hot('a-----b-----cd');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 10, maxWaitMs: 50 })))).toBe(
        '---a-----b-----c--d',
      );
      flush();
      expect(starts()).toEqual([
        [0, 'a'],
        [6, 'b'],
        [12, 'c'],
        [15, 'd'], // d was alone in the buffer when the write of c completed
      ]);
    });
  });

  it('on completion writes everything left in successive batches without a window, then completes', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      const source = hot('a(bcdefg|)');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 4, maxWaitMs: 50 })))).toBe('---A--B--(C|)', {
        A: 'a',
        B: 'bcde',
        C: 'fg',
      });
      flush();
      // f,g are a backlog of two that does not fill a batch, but the source is done: no window.
      expect(starts()).toEqual([
        [0, 'a'],
        [3, 'bcde'],
        [6, 'fg'],
      ]);
    });
  });

  it('completes at once when the source completes with nothing buffered', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, flush }) => {
      const { write, starts } = recordingWriter(scheduler, cold, 3);
      expectObservable(hot('a------|').pipe(bufferBounded(write, config(scheduler, {})))).toBe('---a---|');
      flush();
      expect(starts()).toEqual([[0, 'a']]);
    });
  });

  it('propagates a source error at once, dropping the buffer and cancelling the write in flight', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions, flush }) => {
      const { writes, write } = recordingWriter(scheduler, cold, 5);
      const err = new Error('source failed');
      expectObservable(hot('ab#', undefined, err).pipe(bufferBounded(write, config(scheduler, {})))).toBe('--#', undefined, err);
      flush();
      expect(writes.map((w) => w.batch)).toEqual([['a']]);
      expectSubscriptions((writes[0].write as unknown as { subscriptions: never }).subscriptions).toBe('^-!');
    });
  });

  it('propagates a write error (emitted or thrown) at once and unsubscribes the source', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const err = new Error('write failed');
      const write = (batch: string[]) => (batch.includes('x') ? cold('--#', undefined, err) : cold('-(w|)', { w: batch.join('') }));
      const source = hot('a-x---b');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, {})))).toBe('-a--#', { a: 'a' }, err);
      expectSubscriptions(source.subscriptions).toBe('^---!');

      const thrown = new Error('write threw');
      const throwing = () => {
        throw thrown;
      };
      const source2 = hot('--a--b');
      expectObservable(source2.pipe(bufferBounded(throwing, config(scheduler, {})))).toBe('--#', undefined, thrown);
    });
  });

  it('starts the next write only after the previous one completed, and forwards everything a write emits', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, flush }) => {
      const spans: { start: number; end?: number; batch: string }[] = [];
      const write = (batch: string[]) => {
        const span: { start: number; end?: number; batch: string } = { start: scheduler.now(), batch: batch.join('') };
        spans.push(span);
        const w = cold('--x--(y|)', { x: `${span.batch}:1`, y: `${span.batch}:2` });
        return new Observable<string>((subscriber) =>
          w.subscribe({
            next: (v) => subscriber.next(v),
            complete: () => {
              span.end = scheduler.now();
              subscriber.complete();
            },
          }),
        );
      };
      // An item every frame for 20 frames; each write takes 5.
      const source = hot('abcdefghijklmnopqrst|');
      const out: string[] = [];
      let completedAt = -1;
      source.pipe(bufferBounded(write, config(scheduler, { maxCount: 3, maxWaitMs: 2 }))).subscribe({
        next: (v) => out.push(v),
        complete: () => (completedAt = scheduler.now()),
      });
      flush();
      expect(spans.length).toBeGreaterThan(5);
      for (let i = 1; i < spans.length; i++) expect(spans[i].start).toBeGreaterThanOrEqual(spans[i - 1].end!);
      expect(spans.map((s) => s.batch).join('')).toBe('abcdefghijklmnopqrst');
      expect(out).toEqual(spans.flatMap((s) => [`${s.batch}:1`, `${s.batch}:2`]));
      expect(completedAt).toBe(spans[spans.length - 1].end);
    });
  });

  it('keeps its state per subscription and tears down the window and the write in flight on unsubscribe', () => {
    const scheduler = newScheduler();
    scheduler.run(({ cold, expectObservable, expectSubscriptions, flush }) => {
      const { writes, write } = recordingWriter(scheduler, cold, 3);
      const piped = cold('abc-|').pipe(bufferBounded(write, config(scheduler, { maxWaitMs: 5 })));
      expectObservable(piped).toBe('---A---(B|)', { A: 'a', B: 'bc' }); // the completion at 4 ends the window opened at 3
      expectObservable(piped, '----------^').toBe('-------------A---(B|)', { A: 'a', B: 'bc' });
      expectObservable(piped, '--------------------^-!').toBe('');
      expectObservable(piped, '------------------------------^---!').toBe('33ms a'); // gone during the window 33..38
      flush();
      expect(writes.map((w) => [w.at, w.batch.join('')])).toEqual([
        [0, 'a'],
        [4, 'bc'],
        [10, 'a'],
        [14, 'bc'],
        [20, 'a'],
        [30, 'a'],
      ]);
      expectSubscriptions((writes[4].write as unknown as { subscriptions: never }).subscriptions).toBe('--------------------^-!');
    });
  });

  it('handles writes that complete synchronously, and still cancels the asynchronous write they started on unsubscribe', () => {
    const scheduler = newScheduler();
    scheduler.run(({ hot, cold, expectObservable, expectSubscriptions }) => {
      const slow: Observable<string>[] = [];
      const write = (batch: string[]) => {
        if (batch.includes('b')) return of(batch.join('')); // completes synchronously
        const w = cold('---(x|)', { x: batch.join('') });
        slow.push(w);
        return w;
      };
      // at 3 the backlog b,c,d,e is full: bc is written synchronously, then de starts at once.
      const source = hot('a(bcde)');
      expectObservable(source.pipe(bufferBounded(write, config(scheduler, { maxCount: 2 }))), '^---!').toBe('---(AB)', { A: 'a', B: 'bc' });
      scheduler.schedule(() => expectSubscriptions((slow[1] as unknown as { subscriptions: never }).subscriptions).toBe('---^!'), 5);
    });
  });

  it('refuses maxCount below 1', () => {
    expect(() => bufferBounded(() => [], { maxCount: 0, maxBytes: 1, maxWaitMs: 1 })).toThrow(RangeError);
  });
});
