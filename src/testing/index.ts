/**
 * acta/testing (docs/reference.md, "acta/testing"): runAttempt runs a definition's handler in this
 * process, without a database, with a test context and the worker's own verdict on the attempt;
 * VirtualClock runs scheduled work and promises in virtual time; memoryLedger is the ledger in
 * memory, making the SQL functions' decisions on a scheduler's clock.
 * The public API of the entry point and nothing else; nothing in src/ imports it.
 */
export { runAttempt, type AttemptRun, type LogLine, type RunAttemptOptions } from './runAttempt';
export { ABORT_CAUSES, type AbortCause } from '../worker/registry';
export { VirtualClock, fromMarbles, type Recording } from './virtualClock';
export {
  memoryLedger,
  InjectedConnectionError,
  type MemoryLedger,
  type MemoryLedgerOptions,
  type MemoryLedgerState,
  type LedgerCall,
  type LedgerRoundTrip,
  type LedgerLatency,
  type GateKind,
  type MemoryJob,
  type MemoryExecution,
  type MemoryStep,
  type MemoryGate,
  type MemoryMeterStart,
  type MemoryWorker,
  type MemoryDefinition,
  type MemoryNamespace,
  type MemoryPass,
} from './memoryLedger';
export { sqlLedger, type Ledger, type RegisterArgs, type ClaimArgs, type HeartbeatArgs } from '../ledger';
export { injectFaults, InjectedFaultError, type Faults, type FaultyCall } from './faults';
