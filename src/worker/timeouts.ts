import type { SchedulerLike, Subscription } from 'rxjs';

/** A pending timeout; `cancel()` is idempotent and does nothing once it has fired. */
export interface Timeout {
  cancel(): void;
}

class Item implements Timeout {
  done = false;
  constructor(
    readonly queue: DurationQueue,
    readonly at: number,
    readonly fire: () => void,
  ) {}

  cancel(): void {
    if (this.done) return;
    this.done = true;
    this.queue.live--;
    this.queue.tidy();
  }
}

/**
 * The timeouts of one duration, a FIFO: they expire in the order they started. (Not a lane: a
 * lane is a FIFO group of jobs by key, docs/DESIGN.md, "Policies".)
 */
class DurationQueue {
  items: Item[] = [];
  /** Index of the first item that may still be live. */
  head = 0;
  live = 0;
  action: Subscription | null = null;

  constructor(private readonly scheduler: SchedulerLike) {}

  add(item: Item): void {
    this.items.push(item);
    this.live++;
    if (!this.action) this.arm();
  }

  /** Drops finished items from the front, and compacts when finished items dominate the list. */
  tidy(): void {
    const { items } = this;
    while (this.head < items.length && items[this.head].done) this.head++;
    if (this.live === 0) {
      this.items = [];
      this.head = 0;
      this.action?.unsubscribe(); // nothing pending: no timer left behind
      this.action = null;
    } else if (items.length - this.head > 2 * this.live + 1024) {
      // A long attempt at the front keeps finished ones behind it: keep only the live ones.
      this.items = items.filter((it, i) => i >= this.head && !it.done);
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > items.length) {
      this.items = items.slice(this.head);
      this.head = 0;
    }
  }

  private arm(): void {
    const first = this.items[this.head];
    this.action = this.scheduler.schedule(() => this.expire(), Math.max(0, first.at - this.scheduler.now()));
  }

  private expire(): void {
    this.action = null;
    const now = this.scheduler.now();
    const due: Item[] = [];
    for (; this.head < this.items.length; this.head++) {
      const item = this.items[this.head];
      if (item.done) continue;
      if (item.at > now) break;
      item.done = true;
      this.live--;
      due.push(item);
    }
    this.tidy();
    if (this.live > 0 && !this.action) this.arm();
    for (const item of due) item.fire();
  }
}

/**
 * The execution timeouts of one worker's attempts, with one scheduled action per distinct
 * duration instead of one timer per attempt. Timeouts of the same duration expire in the order
 * they were started, so each duration keeps a FIFO and one action, set for its oldest live entry;
 * cancelling is marking (O(1) amortised: finished entries are dropped from the front, and the
 * list is compacted when they outnumber the live ones, so memory stays O(live)). An action that
 * comes due after its entry was cancelled re-arms for the next live one: at most one extra wakeup
 * per duration per timeout period. With nothing pending no action is left scheduled.
 *
 * Why: a timer per attempt would be set and cleared on the path every job takes, for a timeout
 * that almost never fires (docs/decisions/2026-11-30-shared-timeouts.md). test/timeouts.spec.ts.
 */
export class Timeouts {
  private readonly queues = new Map<number, DurationQueue>();

  /** `scheduler`: the time source (a worker's scheduler; tests: a TestScheduler). */
  constructor(private readonly scheduler: SchedulerLike) {}

  /** Calls `fire` once, `ms` milliseconds (≥ 0) from now, unless cancelled first. */
  start(ms: number, fire: () => void): Timeout {
    let queue = this.queues.get(ms);
    if (!queue) {
      queue = new DurationQueue(this.scheduler);
      this.queues.set(ms, queue);
    }
    const item = new Item(queue, this.scheduler.now() + ms, fire);
    queue.add(item);
    return item;
  }

  /** Timeouts started and neither fired nor cancelled. */
  get pending(): number {
    let n = 0;
    for (const queue of this.queues.values()) n += queue.live;
    return n;
  }

  /** Entries held in memory, live or finished but not yet dropped (for tests: stays O(pending)). */
  get retained(): number {
    let n = 0;
    for (const queue of this.queues.values()) n += queue.items.length;
    return n;
  }
}
