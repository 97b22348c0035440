import { InvalidJsonError } from '../src/errors';
import { JSONB_MAX_BYTES, toJsonText } from '../src/json';

/** The InvalidJsonError toJsonText throws for `value` (fails the test if it does not throw one). */
function refusal(value: unknown): InvalidJsonError {
  try {
    toJsonText(value);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidJsonError);
    return err as InvalidJsonError;
  }
  throw new Error(`toJsonText accepted ${String(value)}`);
}

describe('toJsonText', () => {
  it('serialises plain JSON like JSON.stringify', () => {
    const value = { a: [1, 'two', { b: null, c: true }], d: 'é✓', e: 1.5 };
    expect(toJsonText(value)).toBe(JSON.stringify(value));
    expect(toJsonText(null)).toBe('null');
    expect(toJsonText('x')).toBe('"x"');
  });

  it('follows JSON.stringify for undefined members, non-finite numbers and toJSON', () => {
    expect(toJsonText({ a: undefined, b: [undefined, () => 1], c: NaN, d: Infinity })).toBe('{"b":[null,null],"c":null,"d":null}');
    expect(toJsonText({ at: new Date(0) })).toBe('{"at":"1970-01-01T00:00:00.000Z"}');
  });

  it('refuses a BigInt and names its path', () => {
    const err = refusal({ a: [0, 1, { b: 10n }] });
    expect(err.path).toBe('$.a[2].b');
    expect(err.message).toMatch(/BigInt/);
    expect(err.code).toBe('ACTA_INVALID_JSON');
    expect(refusal(1n).path).toBe('$');
  });

  it('refuses a value nested deeper than the stack with InvalidJsonError, not a RangeError', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    const err = refusal(deep);
    expect(err.path).toBe('$');
    expect(err.message).toMatch(/nested too deeply/);
  });

  it('refuses a value that throws when read (a getter, a Proxy trap, a revoked Proxy) with InvalidJsonError naming where, not the thrown error', () => {
    const getter = refusal({ a: [{ ok: 1, get g() { throw new Error('getter boom'); } }] });
    expect(getter.path).toBe('$.a[0].g');
    expect(getter.message).toMatch(/reading it threw: getter boom/);
    const keys = refusal({ p: new Proxy({ a: 1 }, { ownKeys() { throw new Error('ownKeys boom'); } }) });
    expect([keys.path, keys.message]).toEqual(['$.p', expect.stringMatching(/reading it threw: ownKeys boom/)]);
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    const rev = refusal({ list: [0, revoked.proxy] });
    expect(rev.path).toBe('$.list[1]');
    expect(rev.message).toMatch(/reading it threw: .*revoked/);
    const thrower = refusal({ get x() { throw 'not an Error'; } }); // eslint-disable-line no-throw-literal
    expect([thrower.path, thrower.message]).toEqual(['$.x', expect.stringMatching(/reading it threw: not an Error$/)]);
  });

  it('refuses a text of more UTF-8 bytes than a jsonb value holds (JSONB_MAX_BYTES; here a bound of 20 bytes), counting bytes, not characters', () => {
    expect(JSONB_MAX_BYTES).toBe(268_435_455);
    expect(toJsonText('x'.repeat(18), 20)).toBe(`"${'x'.repeat(18)}"`); // 20 bytes
    expect(() => toJsonText('x'.repeat(19), 20)).toThrow(/^value at \$ cannot be stored as jsonb: its JSON text is 21 bytes, more than the 20 a jsonb value holds$/);
    expect(toJsonText('€'.repeat(6), 20)).toBe('"€€€€€€"'); // 8 characters, 20 bytes
    expect(() => toJsonText('€'.repeat(7), 20)).toThrow(/its JSON text is 23 bytes/); // 9 characters
    expect(() => toJsonText({ a: '€'.repeat(6) }, 20)).toThrow(/its JSON text is 26 bytes/);
  });

  it('refuses a circular reference and names where it closes', () => {
    const a: Record<string, unknown> = { x: 1 };
    a.list = [0, { back: a }];
    const err = refusal({ root: a });
    expect(err.path).toBe('$.root.list[1].back');
    expect(err.message).toMatch(/circular/);
  });

  it('accepts a shared (non-circular) reference', () => {
    const shared = { v: 1 };
    expect(toJsonText({ a: shared, b: [shared] })).toBe('{"a":{"v":1},"b":[{"v":1}]}');
  });

  it('refuses \\u0000 in a value', () => {
    const err = refusal({ a: [0, 1, { b: 'x\u0000y' }] });
    expect(err.path).toBe('$.a[2].b');
    expect(err.message).toMatch(/\\u0000/);
    expect(refusal('\u0000').path).toBe('$');
  });

  it('refuses \\u0000 in a key', () => {
    const err = refusal({ a: { 'k\u0000': 1 } });
    expect(err.path).toBe('$.a["k\\u0000"]'); // printable, as JSON writes it
    expect(err.message).toMatch(/key/);
  });

  it('refuses a lone high surrogate and a lone low surrogate, in values and keys', () => {
    expect(refusal({ s: 'a\uD83D' }).path).toBe('$.s'); // high, at the end
    expect(refusal({ s: '\uD83Dz' }).path).toBe('$.s'); // high, followed by a non-surrogate
    expect(refusal({ s: ['\uDE00a'] }).path).toBe('$.s[0]'); // low, alone
    expect(refusal({ s: '\uDE00\uD83D' }).path).toBe('$.s'); // reversed pair: both lone
    const key = refusal({ ['\uDC00']: 1 });
    expect(key.path).toBe('$["\\udc00"]');
    expect(key.message).toMatch(/surrogate/);
  });

  it('a key that is no identifier is named in brackets, as JSON writes it: the path names one place', () => {
    expect(refusal({ 'user.email': { n: 1n } }).path).toBe('$["user.email"].n'); // not $.user.email
    expect(refusal({ 'first name': [1n] }).path).toBe('$["first name"][0]');
    expect(refusal({ ok_1$: { '': 1n } }).path).toBe('$.ok_1$[""]');
    expect(refusal({ '1st': 1n }).path).toBe('$["1st"]');
  });

  it('accepts a valid surrogate pair', () => {
    expect(toJsonText({ emoji: '\uD83D\uDE00', ['\uD83D\uDE00']: 'k' })).toBe('{"emoji":"😀","😀":"k"}');
  });

  it('accepts an escaped backslash followed by "u0000" and "ud800" (text, not an escape)', () => {
    expect(toJsonText({ s: '\\u0000' })).toBe('{"s":"\\\\u0000"}');
    expect(toJsonText({ s: '\\ud800', t: '\\\\\\u0000' })).toBe(JSON.stringify({ s: '\\ud800', t: '\\\\\\u0000' }));
    // …but a backslash followed by a real NUL is still refused.
    expect(refusal({ s: '\\\u0000' }).path).toBe('$.s');
  });

  it('refuses undefined, a function and a symbol at the top level', () => {
    for (const value of [undefined, () => 1, Symbol('s')]) {
      const err = refusal(value);
      expect(err.path).toBe('$');
      expect(err.message).toMatch(/not JSON/);
    }
  });

  it('a Map or a Set (and their weak kinds) is refused at its path: JSON.stringify writes each as {}, its contents lost', () => {
    const map = refusal({ a: [1, { byId: new Map([['x', 1]]) }] });
    expect(map.path).toBe('$.a[1].byId');
    expect(map.message).toMatch(/a Map is not JSON.*Object\.fromEntries/);
    expect(refusal({ tags: new Set(['a']) }).message).toMatch(/a Set is not JSON.*\[\.\.\.set\]/);
    expect(refusal(new Map()).path).toBe('$');
    expect(refusal([new WeakMap()]).message).toMatch(/WeakMap/);
    expect(refusal({ s: new WeakSet() }).path).toBe('$.s');
    // A text holding {} for another reason is walked and stored as it is.
    expect(toJsonText({ empty: {}, text: '{}', list: [{}] })).toBe('{"empty":{},"text":"{}","list":[{}]}');
    // toJSON is honoured first: a Map that says how it is written is stored so.
    class Entries<K, V> extends Map<K, V> {
      toJSON() {
        return Object.fromEntries(this);
      }
    }
    expect(toJsonText({ m: new Entries([['k', 1]]) })).toBe('{"m":{"k":1}}');
    expect(toJsonText({ m: new Entries() })).toBe('{"m":{}}');
  });

  it('honours toJSON when it searches the path', () => {
    const err = refusal({ a: { toJSON: () => ({ inner: [1n] }) } });
    expect(err.path).toBe('$.a.inner[0]');
  });
});

describe('toJsonText, odd inputs', () => {
  it('looks inside boxed strings and BigInts as JSON.stringify does', () => {
    expect(toJsonText({ s: new String('ok') })).toBe('{"s":"ok"}');
    expect(refusal({ s: [new String('a\u0000')] }).path).toBe('$.s[0]');
    const boxed = refusal({ n: Object(5n) });
    expect(boxed.path).toBe('$.n');
    expect(boxed.message).toMatch(/BigInt/);
  });

  it('reports a throwing toJSON as InvalidJsonError at its path', () => {
    const err = refusal({ a: [{ toJSON: () => { throw new Error('nope'); } }] });
    expect(err.path).toBe('$.a[0]');
    expect(err.message).toMatch(/toJSON threw: nope/);
  });
});
