/** The base of acta's typed errors (src/errors.ts, src/dbErrors.ts), apart so both can extend it without an import cycle. */

/** Base class: `code` is stable and safe to switch on. */
export class ActaError extends Error {
  /** Thrown by enqueueMany about one of its items: that item's index (0-based), also named at the start of the message. */
  item?: number;

  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * Marks `err`, thrown about one of the items of an enqueueMany (or `call`: publishMany) call, as
 * that item's: `item` is set and the message (and the stack's first line) starts with
 * "<call> item <index>: ".
 * Returns `err`.
 */
export function atItem<E extends ActaError>(err: E, index: number, call = 'enqueueMany'): E {
  // One that is marked already (an instance of the caller's own, thrown again) or frozen stays as
  // it is: marked again it read "enqueueMany item 0: enqueueMany item 0: ..."; frozen, the marking
  // threw a TypeError in its place.
  if (err.item !== undefined || !Object.isExtensible(err)) return err;
  try {
    const before = err.message;
    const stack = err.stack; // formatted now, with the message as it was
    err.item = index;
    err.message = `${call} item ${index}: ${before}`;
    if (typeof stack === 'string') err.stack = stack.replace(before, () => err.message);
  } catch {
    /* a property that cannot be written: the error goes out as far as it was marked */
  }
  return err;
}
