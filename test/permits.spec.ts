import { Permits } from '../src/worker/permits';

describe('Permits', () => {
  it('starts with every permit free; takeAll takes all of them, and 0 when none is free', () => {
    const permits = new Permits(4);
    expect(permits.total).toBe(4);
    expect(permits.available).toBe(4);
    expect(permits.takeAll()).toBe(4);
    expect(permits.available).toBe(0);
    expect(permits.takeAll()).toBe(0);
  });

  it('release returns permits and emits the count on released$ (synchronously)', () => {
    const permits = new Permits(3);
    const released: number[] = [];
    permits.released$.subscribe((n) => released.push(n));
    permits.takeAll();
    permits.release(1);
    expect(released).toEqual([1]);
    expect(permits.available).toBe(1);
    permits.release(2);
    expect(released).toEqual([1, 2]);
    expect(permits.available).toBe(3);
  });

  it('giveBack returns permits silently: released$ does not emit', () => {
    const permits = new Permits(3);
    const released: number[] = [];
    permits.released$.subscribe((n) => released.push(n));
    permits.takeAll();
    permits.giveBack(2);
    expect(permits.available).toBe(2);
    expect(released).toEqual([]);
  });

  it('returning 0 is a no-op and emits nothing', () => {
    const permits = new Permits(2);
    const released: number[] = [];
    permits.released$.subscribe((n) => released.push(n));
    permits.takeAll();
    permits.release(0);
    permits.giveBack(0);
    expect(permits.available).toBe(0);
    expect(released).toEqual([]);
  });

  it('throws when a release or giveBack would exceed the total, and changes nothing', () => {
    const permits = new Permits(2);
    const released: number[] = [];
    permits.released$.subscribe((n) => released.push(n));
    expect(() => permits.release(1)).toThrow(RangeError);
    expect(() => permits.giveBack(1)).toThrow(/exceed 2/);
    permits.takeAll();
    permits.release(1);
    expect(() => permits.release(2)).toThrow(RangeError);
    expect(permits.available).toBe(1);
    expect(released).toEqual([1]);
  });

  it('throws on a negative or fractional count', () => {
    const permits = new Permits(2);
    permits.takeAll();
    expect(() => permits.release(-1)).toThrow(RangeError);
    expect(() => permits.giveBack(0.5)).toThrow(RangeError);
    expect(permits.available).toBe(0);
  });
});
