/**
 * acta/testing: runs a definition's handler in this process, without a database, with a test
 * context and the worker's own verdict on the attempt (docs/reference.md, "acta/testing").
 * The public API of the entry point and nothing else; nothing in src/ imports it.
 */
export { runAttempt, type AttemptRun, type LogLine, type RunAttemptOptions } from './runAttempt';
export { ABORT_CAUSES, type AbortCause } from '../registry';
export { VirtualClock, fromMarbles, type Recording } from './virtualClock';
