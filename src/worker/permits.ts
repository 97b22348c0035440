import { Observable, Subject } from 'rxjs';

/**
 * The executor permits (N of them): a claim takes a row only for a free permit, and an executor
 * returns its permit only after it handed its completion to the finalizer (docs/DESIGN.md, "The
 * pipeline inside one worker": Claimer, Executor). This is what bounds `mergeMap(run, N)`'s input:
 * mergeMap holds whatever arrives beyond its N running, without limit (test/permits.spec.ts).
 */
export class Permits {
  private free: number;
  private readonly released = new Subject<number>();
  /** Emits the count of each release by an executor. `giveBack` (the claimer's unused permits) does not emit. */
  readonly released$: Observable<number> = this.released.asObservable();

  constructor(readonly total: number) {
    this.free = total;
  }

  /** Free permits now. */
  get available(): number {
    return this.free;
  }

  /** Takes every free permit; returns how many (0 if none). */
  takeAll(): number {
    const n = this.free;
    this.free = 0;
    return n;
  }

  /**
   * Executors return `n` permits (an executor returns its one permit after handing its completion
   * to the finalizer): emits `n` on released$, which the claimer collects before claiming again.
   * Throws RangeError if that would make more than `total` free, or `n` is not a whole number ≥ 0.
   */
  release(n: number): void {
    if (this.add(n)) this.released.next(n);
  }

  /**
   * The claimer gives back the permits a claim did not use (or all of them after an empty or
   * failed claim): silent, it is not work finishing. Throws like `release`.
   */
  giveBack(n: number): void {
    this.add(n);
  }

  private add(n: number): boolean {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`permits: cannot return ${n}`);
    if (n === 0) return false;
    if (this.free + n > this.total) throw new RangeError(`permits: returning ${n} would exceed ${this.total}`);
    this.free += n;
    return true;
  }
}
