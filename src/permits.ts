import { Observable, Subject } from 'rxjs';

/**
 * The executor permits (N of them): a claim takes a row only for a free permit, and an executor
 * returns its permit only after it handed its completion to the finalizer (shared/DESIGN.md,
 * "Claimer", "Executor"). This is what bounds `mergeMap(run, N)`'s input, which would otherwise
 * buffer without limit (STYLE.md, known traps).
 */
export class Permits {
  private free: number;
  private readonly released = new Subject<number>();
  /** Emits the count of each release by an executor (or after a failed claim). */
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

  /** An executor returns its permit (`n` = 1), or `n` come back after a failed claim: emits on released$. */
  release(n: number): void {
    if (this.add(n)) this.released.next(n);
  }

  /** The claimer gives back the permits a claim did not use: silent, it is not work finishing. */
  giveBack(n: number): void {
    this.add(n);
  }

  private add(n: number): boolean {
    if (n <= 0) return false;
    if (this.free + n > this.total) throw new RangeError(`permits: returning ${n} would exceed ${this.total}`);
    this.free += n;
    return true;
  }
}
