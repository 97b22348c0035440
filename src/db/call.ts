import type { Db, Queryable } from './Db';

/**
 * The SQL functions of sql/functions/, which the typed wrappers of src/db/ call one round trip
 * each (jobs.ts, executions.ts, workers.ts, namespaces.ts, steps.ts, retention.ts, alerts.ts): each function's identity
 * arguments as the catalog prints them (`pg_get_function_identity_arguments`);
 * test/db/catalog.test.ts holds them against the live catalog.
 */
export const SIGNATURES = {
  enqueue_jobs:
    'p_namespace text, p_definitions text[], p_payloads jsonb, p_priorities integer[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_idempotency_keys text[], p_concurrency_keys text[], p_rate_keys text[], p_lanes text[], p_checks boolean[]',
  enqueue_jobs_wake_early:
    'IN p_namespace text, IN p_definitions text[], IN p_payloads jsonb, IN p_priorities integer[], IN p_run_ats timestamp with time zone[], IN p_max_attempts integer[], IN p_idempotency_keys text[], IN p_concurrency_keys text[], IN p_rate_keys text[], IN p_lanes text[], IN p_checks boolean[], INOUT ids text, INOUT created text',
  wal_message_allowed: 'p_args integer',
  claim_jobs: 'p_namespace text, p_worker uuid, p_definitions text[], p_limit integer, p_lease_ms integer',
  complete_executions:
    'p_worker uuid, p_ids bigint[], p_executions integer[], p_outcomes text[], p_results jsonb[], p_errors jsonb[], p_retry_delays_ms integer[], p_next_fires timestamp with time zone[]',
  heartbeat: 'p_worker uuid, p_namespace text, p_ids bigint[], p_executions integer[], p_started boolean[], p_lease_ms integer, p_passes text[], p_pass_intervals_ms integer[]',
  recover_jobs: 'p_namespace text, p_dead_after_ms integer, p_limit integer',
  register_worker:
    'p_worker uuid, p_namespace text, p_hostname text, p_pid integer, p_definitions text[], p_max_attempts integer[], p_passes text[], p_pass_intervals_ms integer[], p_build text, p_policies jsonb, p_lease_ms integer',
  take_passes: 'p_namespace text, p_passes text[], p_intervals_ms integer[]',
  release_passes: 'p_namespace text, p_passes text[]',
  stop_worker: 'p_worker uuid',
  refresh_definitions: 'p_namespace text, p_names text[]',
  record_step: 'p_worker uuid, p_job_id bigint, p_execution integer, p_name text, p_result jsonb',
  cancel_job: 'p_namespace text, p_id bigint',
  watch_job: 'p_namespace text, p_id bigint',
  report_progress: 'p_worker uuid, p_ids bigint[], p_executions integer[], p_values jsonb',
  // The trigger function of migration 0009 (jobs_watched_notify): no wrapper calls it.
  notify_job_changed: '',
  // The trigger function of migration 0012 (jobs_lane_position): a lane row's position at commit.
  take_lane_position: '',
  gate_lock: 'p_namespace text, p_kind text, p_key text',
  gate_room: 'p_namespace text, p_kind text, p_key text, p_definition text, p_at timestamp with time zone, OUT room integer, OUT next_at timestamp with time zone',
  release_gate: 'p_namespace text, p_kind text, p_key text',
  recheck_gates: 'p_namespace text, p_names text[]',
  pause: 'p_namespace text, p_definition text, p_by text, p_reason text',
  resume: 'p_namespace text, p_definition text',
  arm_schedules: 'p_namespace text, p_names text[], p_versions integer[], p_instants timestamp with time zone[]',
  reconcile_schedules: 'p_namespace text, p_names text[]',
  // The runtime writes of client.schedules (src/db/schedules.ts).
  put_schedule:
    'p_namespace text, p_name text, p_definition text, p_cron text, p_time_zone text, p_payload jsonb, p_catch_up text, p_catch_up_window_ms bigint, p_priority integer, p_concurrency_key text, p_rate_key text, p_lane text',
  pause_schedule: 'p_namespace text, p_name text, p_paused boolean',
  remove_schedule: 'p_namespace text, p_name text',
  // Called by acta.claim_jobs for a claimed fire only: no wrapper calls it.
  claimed_fire:
    'p_namespace text, p_schedule text, p_scheduled_at timestamp with time zone, p_claimed_at timestamp with time zone, p_job bigint',
  // Workflows (migration 0016; docs/workflows.md).
  send_signal: 'p_namespace text, p_id bigint, p_job_key text, p_name text, p_payload jsonb, p_idempotency_key text',
  spawn_children:
    'p_worker uuid, p_parent bigint, p_execution integer, p_step text, p_definitions text[], p_payloads jsonb, p_priorities integer[], p_run_ats timestamp with time zone[], p_max_attempts integer[], p_idempotency_keys text[], p_concurrency_keys text[], p_rate_keys text[], p_lanes text[], p_fail_parent boolean[], p_checks boolean[]',
  wake_job: 'p_id bigint, p_answer jsonb',
  settle_waits: 'p_ids bigint[]',
  tell_parents: 'p_parents bigint[], p_failed boolean[]',
  release_waits: 'p_namespace text, p_limit integer',
  job_descendants: 'p_id bigint',
  // The trigger function of migration 0016 (jobs_child_deleted): no wrapper calls it.
  jobs_child_deleted: '',
  prune_jobs: 'p_namespace text, p_succeeded_ms bigint, p_cancelled_ms bigint, p_failed_ms bigint, p_limit integer',
  // Called by prune_jobs, complete_executions and the admin's deleteJobs only.
  delete_jobs: 'p_ids bigint[]',
  // The admin's retryJobs (src/client/bulkOperations.ts), inside its batch statement.
  retry_jobs: 'p_namespace text, p_ids bigint[]',
  // Called by delete_jobs and complete_executions (retention zero) only.
  delete_job_references: 'p_ids bigint[]',
  evaluate_alerts:
    'p_namespace text, p_dead_window_ms bigint, p_ready_age_ms bigint, p_failure_window_ms bigint, p_failure_rate double precision, p_failure_min_jobs integer, p_keep_resolved_ms bigint, p_schedule_late_ms bigint, p_on_alert text',
  // The outbox (migration 0018; docs/outbox.md).
  publish_events: 'p_namespace text, p_topics text[], p_keys text[], p_messages jsonb',
  fan_out_events: 'p_namespace text, p_limit integer',
} as const;

/** `q.prepared` when `q` is a Db (the worker's own calls), else `q.query` (a transaction, a caller's client). */
export function runStatement<R>(q: Queryable, name: string, text: string, params: unknown[]): Promise<{ rows: R[] }> {
  const db = q as Partial<Db>;
  return typeof db.prepared === 'function' ? db.prepared<R>(name, text, params) : q.query<R>(text, params);
}
