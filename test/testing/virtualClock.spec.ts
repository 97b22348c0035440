// VirtualClock (src/testing/virtualClock.ts): scheduled work and the promises it resolves, each at
// its own virtual time.
import { firstValueFrom, interval, map, take, timer } from 'rxjs';
import { fromMarbles, VirtualClock } from '../../src/testing/virtualClock';

test('an answer due at 5 ms that schedules more work at +3 ms: each at its own time, with the promise between them settled', async () => {
  const clock = new VirtualClock();
  const seen: [string, number][] = [];
  const answer = () => firstValueFrom(timer(5, clock.scheduler).pipe(map(() => 'answer')));
  void (async () => {
    const a = await answer(); // a promise resolved by a scheduled action
    seen.push([a, clock.now()]);
    await firstValueFrom(timer(3, clock.scheduler));
    seen.push(['after', clock.now()]);
  })();
  await clock.advance(4);
  expect(seen).toEqual([]);
  await clock.advance(10);
  expect(seen).toEqual([
    ['answer', 5],
    ['after', 8],
  ]);
  expect(clock.now()).toBe(14);
});

test('a recording as marbles: values at their virtual frames, one frame per ms', async () => {
  const clock = new VirtualClock();
  const recording = clock.record(interval(10, clock.scheduler).pipe(take(3)));
  await clock.advance(35);
  expect(recording.entries).toEqual(fromMarbles('10ms a 9ms b 9ms c', { a: 0, b: 1, c: 2 }));
  expect(fromMarbles('-(ab)-c|', { a: 1, b: 2, c: 3 })).toEqual([
    { at: 1, value: 1 },
    { at: 1, value: 2 },
    { at: 6, value: 3 },
  ]);
});

test('advanceUntil stops once done, or rejects after maxMs; advance refuses a bad step', async () => {
  const clock = new VirtualClock();
  let fired = false;
  timer(250, clock.scheduler).subscribe(() => (fired = true));
  expect(await clock.advanceUntil(() => fired, { stepMs: 10 })).toBe(250);
  await expect(clock.advanceUntil(() => false, { maxMs: 100, stepMs: 50 })).rejects.toThrow('not done after 100 virtual ms');
  await expect(clock.advance(-1)).rejects.toThrow('ms must be an integer');
});

test('a step that never moves time, or a bound never reached, is refused instead of looping for ever', async () => {
  const clock = new VirtualClock();
  const never = new Promise<void>(() => undefined);
  await expect(clock.advanceUntil(() => false, { stepMs: 0, maxMs: 10 })).rejects.toThrow('advanceUntil: stepMs must be an integer ≥ 1, got 0');
  await expect(clock.advanceUntil(() => false, { stepMs: -5 })).rejects.toThrow('advanceUntil: stepMs must be an integer ≥ 1, got -5');
  await expect(clock.await(never, { stepMs: 0.5 })).rejects.toThrow('await: stepMs must be an integer ≥ 1, got 0.5');
  await expect(clock.await(never, { maxMs: NaN })).rejects.toThrow('await: maxMs must be an integer ≥ 0 (or Infinity), got NaN');
  await expect(clock.await(never, { maxMs: 30 })).rejects.toThrow('await: the promise did not settle within 30 virtual ms');
  expect(clock.now()).toBe(30);
}, 5_000);
