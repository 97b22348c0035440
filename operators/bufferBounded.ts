import { asyncScheduler, defer, Observable, type ObservableInput, type OperatorFunction, type SchedulerLike, Subscription } from 'rxjs';

/** Configuration of {@link bufferBounded}. */
export interface BufferBoundedConfig<T> {
  /** Most items in one batch (acta's finalizer: 128). */
  maxCount: number;
  /** Most bytes in one batch, by `sizeOf` (acta: 4 MiB). A single larger item goes alone. */
  maxBytes: number;
  /** Extra wait to fill a batch, only when the read that starts it found a backlog (acta: 50 ms). */
  maxWaitMs: number;
  /** Size of an item in bytes (default 0: only the count bounds a batch). */
  sizeOf?: (item: T) => number;
  /** Time source (default asyncScheduler); a TestScheduler runs it in virtual time. */
  scheduler?: SchedulerLike;
  /**
   * Whether more items may still arrive to fill a batch (default: always; before its first value:
   * yes). Its latest value decides when a window would open and after each item that arrives
   * during one; a `false` ends an open window at once, since waiting could only delay the batch
   * (acta's finalizer: no attempt is running and the last claim came back short).
   */
  moreComing$?: Observable<boolean>;
}

/**
 * A bounded buffer in front of a serial writer. Items wait in the buffer while `write` is busy;
 * when it is free the operator reads one item, then everything already waiting, up to `maxCount`
 * items or `maxBytes` bytes, and calls `write(batch)`, subscribing to the next write only after
 * the previous one completed. If that first read found a backlog (more than one item waiting) and
 * the batch is not full, it waits up to `maxWaitMs` more to fill it, writing early when it fills;
 * a lone item never waits, nor does a backlog when `moreComing$` says nothing else can come (a
 * window ends as soon as it says so). An item larger than `maxBytes` is written alone. When the source
 * completes, everything left is written (no window wait) and then the output completes. Errors of
 * the source, of `moreComing$` or of a write (thrown or emitted) go downstream at once. Emits what the writes emit.
 *
 * The first test of test/operators/bufferBounded.spec.ts is exactly this diagram
 * (maxCount 3, maxWaitMs 5, every write takes 3 ms and emits its batch joined):
 * ```
 * source:  abc-d----efg---------hij--|
 * writes:  [a]                              a alone: nothing waiting, no wait
 *             [bcd]                         b,c waited: window 3..8, d fills it at 4
 *                   [e]                     e alone
 *                      ......[fg]           f,g waited: the window runs out at 17
 *                               [h]         h alone
 *                                  ..[ij]   i,j waited: completion at 26 ends the window
 * output:  ---A---B----E-------F---H----(I|)   A=a B=bcd E=e F=fg H=h I=ij
 * ```
 * Source of the rule: docs/DESIGN.md, "The pipeline inside one worker" (Finalizer).
 */
export function bufferBounded<T, R>(write: (batch: T[]) => ObservableInput<R>, config: BufferBoundedConfig<T>): OperatorFunction<T, R> {
  const { maxCount, maxBytes, maxWaitMs } = config;
  const sizeOf = config.sizeOf ?? (() => 0);
  const scheduler = config.scheduler ?? asyncScheduler;
  if (!(maxCount >= 1)) throw new RangeError(`maxCount must be ≥ 1, got ${maxCount}`);
  return (source) =>
    new Observable<R>((subscriber) => {
      const queue: { item: T; bytes: number }[] = [];
      let queuedBytes = 0;
      let writing = false;
      let window: Subscription | null = null;
      let sourceDone = false;
      let inner: Subscription | null = null;
      let more = true;

      const full = () => queue.length >= maxCount || queuedBytes >= maxBytes;

      const takeBatch = (): T[] => {
        const first = queue.shift()!;
        queuedBytes -= first.bytes;
        const batch = [first.item];
        let bytes = first.bytes;
        if (bytes > maxBytes) return batch;
        while (queue.length > 0 && batch.length < maxCount && bytes + queue[0].bytes <= maxBytes) {
          const next = queue.shift()!;
          queuedBytes -= next.bytes;
          bytes += next.bytes;
          batch.push(next.item);
        }
        return batch;
      };

      const flush = () => {
        window?.unsubscribe();
        window = null;
        const batch = takeBatch();
        writing = true;
        // `current` is known before the write subscribes, so a write that completes synchronously
        // (and starts the next one from pump) cannot clobber the reference to the newer write.
        const current = new Subscription();
        inner = current;
        current.add(
          defer(() => write(batch)).subscribe({
            next: (value) => subscriber.next(value),
            error: (err) => subscriber.error(err),
            complete: () => {
              if (inner === current) inner = null;
              writing = false;
              pump();
            },
          }),
        );
      };

      const pump = () => {
        if (writing || window) return;
        if (queue.length === 0) {
          if (sourceDone) subscriber.complete();
          return;
        }
        if (queue.length > 1 && !full() && !sourceDone && maxWaitMs > 0 && more) {
          window = scheduler.schedule(() => {
            window = null;
            flush();
          }, maxWaitMs);
          return;
        }
        flush();
      };

      const sourceSubscription = source.subscribe({
        next: (item) => {
          const bytes = sizeOf(item);
          queue.push({ item, bytes });
          queuedBytes += bytes;
          if (window && (full() || !more)) flush();
          else pump();
        },
        error: (err) => subscriber.error(err),
        complete: () => {
          sourceDone = true;
          if (window) flush();
          else pump();
        },
      });
      // Its error goes downstream as the source's does (unheard, rxjs would throw it from a timer).
      const moreSubscription = config.moreComing$?.subscribe({
        next: (value) => {
          more = value;
          if (window && !more) flush();
        },
        error: (err: unknown) => subscriber.error(err),
      });

      return () => {
        sourceSubscription.unsubscribe();
        moreSubscription?.unsubscribe();
        window?.unsubscribe();
        inner?.unsubscribe();
      };
    });
}
