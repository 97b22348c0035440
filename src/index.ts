/**
 * acta — a durable job queue for Node.js on PostgreSQL, with an RxJS worker pipeline.
 * The public API and nothing else.
 */
export { createClient, type Client, type ClientOptions, type ObserveOptions, type ResultOptions, type EnqueueItem, type EnqueueItemOf, type PayloadOf, type ResultOf, type EnqueueOptions, type EnqueueResult } from './client/client';
export type { Jsonified } from './json';
export type { Admin } from './client/admin';
export type { JobFilter, JobPage, JobSummary, ListJobsOptions } from './client/listJobs';
export type { JobSelection } from './client/bulkOperations';
export type { AlertsOptions, NamespaceInfo, WorkerInfo } from './client/fleetReads';
export type { AlertInfo } from './db/alerts';
export type { PauseAnswer, PauseRecord } from './db/pauses';
export type { WhyAnswer, WhyCause, WhyReason } from './ops/why';
export { createDashboardHandler, type DashboardHandler, type DashboardOptions } from './ops/dashboard/handler';
export { startDashboard, type DashboardServer, type DashboardServerOptions } from './ops/dashboard/server';
export { createWorker, type Worker, type WorkerOptions } from './worker/worker';
export { runWorker$, type RunWorkerOptions } from './worker/runWorker';
export type { Attempt, AttemptCompletion, HookTools, WorkerHooks } from './worker/hooks';
export type {
  AttemptEventFields,
  CancelledEvent,
  ClaimedEvent,
  DegradedEvent,
  FailedEvent,
  HandedBackEvent,
  RateLimitedEvent,
  WaitingEvent,
  LeaseLostEvent,
  RecoveredEvent,
  RunningEvent,
  StaleEvent,
  StartedEvent,
  StoppedEvent,
  SucceededEvent,
  WorkerEvent,
  WorkerEventsOptions,
} from './worker/events';
export { defineJob, backoffMs, type Backoff, type ConcurrencyPolicy, type Definition, type JobContext, type RatePolicy } from './definition';
export { connect, describeTarget, DEFAULT_DATA_DIR } from './db/connect';
export { createPgDb, type PgDbOptions } from './db/pgDb';
export { createPgliteDb, type PgliteDbOptions } from './db/pgliteDb';
export { withDeadline, type CallOptions, type Db, type Queryable, type ListenHandlers } from './db/Db';
export { migrate, assertMigrated } from './db/migrator';
export type { JobId, TypedJobId, JobRecord, JobStatus, ExecutionRecord, ExecutionOutcome, CompletionOutcome, StoredError, NestedError } from './db/types';
export { leaseClock, defaultExecutors, type LeaseClock } from './config';
export { redisPublisher, type RedisLike } from './worker/wakeups';
export { createLogger } from './logger';
export {
  ActaError,
  AttemptCancelledError,
  AttemptTimeoutError,
  ClaimExpiredError,
  ConfigError,
  DashboardSecurityError,
  DataDirLockedError,
  DataDirUnusableError,
  DataDirVersionError,
  DbClosedError,
  DbUnansweredError,
  EmbeddedShareClosedError,
  HookFailedError,
  InvalidJsonError,
  JobCancelledError,
  JobDeletedError,
  JobFailedError,
  JobNotFoundError,
  ListenUndeliveredError,
  ResultTimeoutError,
  SchemaNewerError,
  SchemaNotMigratedError,
  EnqueueRefusedError,
  type EnqueueRefusal,
  StartTimeoutError,
  UnknownDefinitionError,
  UnstorableStepResultError,
  RateLimitedError,
  SignalTimeoutError,
  ChildFailedError,
  ChildInParentLaneError,
} from './errors';
export { isTransientDbError } from './db/transient';
export type { ScheduleSpec } from './recurring/schedules';
export type { ScheduleRecord } from './db/schedules';
export type { ClientSchedules } from './client/schedules';
export type { SignalOptions, SignalTarget } from './client/signals';
export type { PublishItem, PublishOptions, PublishResult } from './client/publish';
export type { OutboxEvent, OutboxPayload, OutboxPassResult } from './recurring/outbox';
export type { SignalResult } from './workflows/signals';
export type { SignalReceived, WorkflowContext } from './workflows/workflow';
export type { ChildOptions, OnChildFailure, SpawnItem, SpawnItemOf } from './workflows/children';
export type { ChildOutcome } from './db/workflows';
