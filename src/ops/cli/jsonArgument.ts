/*
 * A JSON argument of the command line (`acta enqueue`'s payload, `acta signal`'s, `acta publish`'s
 * message, `acta schedule add --payload`), the one place where JSON text enters acta: the client
 * takes JavaScript values, and a worker reads every payload with JSON.parse. So a number that
 * JavaScript's JSON would write back as another (an integer past 2^53 such as a 64-bit id, more
 * digits than a double holds, beyond its range: null) is refused, naming its path, rather than
 * stored changed and handed to the handler so (test/cli.test.ts, "a JSON argument with a number JavaScript would read as another").
 */
import { InvalidArgumentError } from 'commander';
import { InvalidJsonError } from '../../errors';
import { member } from '../../json';

/**
 * `text` parsed: InvalidArgumentError (`<what> is not JSON: …`) when it is not JSON; InvalidJsonError
 * at the path of the first number that would be stored as another.
 */
export function jsonArgument(what: string, text: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidArgumentError(`${what} is not JSON: ${(err as Error).message}`);
  }
  const inexact = inexactNumber(text);
  if (inexact) {
    const { path, token, read } = inexact;
    throw new InvalidJsonError(path, `the number ${token} would be stored as ${JSON.stringify(read)} (a JavaScript number, as acta and its workers read JSON, cannot hold it): give it as a string, "${token}"`);
  }
  return value;
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/** A decimal's value as one string (sign, digits without leading or trailing zeros, exponent): equal values, equal strings; null for Infinity. */
function canonical(decimal: string): string | null {
  const m = DECIMAL.exec(decimal);
  if (!m) return null;
  const digits = `${m[2]}${m[3] ?? ''}`.replace(/^0+/, '');
  if (digits === '') return '0';
  const significant = digits.replace(/0+$/, '');
  return `${m[1]}${significant}e${Number(m[4] ?? 0) - (m[3]?.length ?? 0) + digits.length - significant.length}`;
}

/**
 * The first number of `text` (valid JSON) whose value JavaScript's reading and writing (Number,
 * then String, as JSON.parse and JSON.stringify) changes, with its path (`$.a[2]`, as
 * InvalidJsonError's), or undefined. One pass over the text: a string is skipped whole, and the
 * path follows the brackets, keys and commas.
 */
function inexactNumber(text: string): { path: string; token: string; read: number } | undefined {
  const path: (string | number)[] = [];
  let key = false; // the next string is a member's key
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === '"') {
      let end = i + 1;
      while (text[end] !== '"') end += text[end] === '\\' ? 2 : 1;
      if (key) path[path.length - 1] = JSON.parse(text.slice(i, end + 1)) as string;
      key = false;
      i = end + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      const token = NUMBER.exec(text)![0];
      const read = Number(token);
      if (canonical(token) !== canonical(String(read))) {
        return { path: path.reduce<string>((p, s) => (typeof s === 'number' ? `${p}[${s}]` : member(p, s)), '$'), token, read };
      }
      i += token.length;
    } else {
      const last = path.length - 1;
      if (c === '{') {
        path.push('');
        key = true;
      } else if (c === '[') path.push(0);
      else if (c === '}' || c === ']') {
        path.pop();
        key = false; // after {}, the next string is no key
      } else if (c === ',') {
        if (typeof path[last] === 'number') path[last] += 1;
        else key = true;
      }
      i++;
    }
  }
  return undefined;
}
