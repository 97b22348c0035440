-- 0021_schedule_keys: a schedule's policy keys (concurrency key, rate key, lane), copied onto each
-- fire it arms (acta.arm_schedules, acta.complete_executions' recurring fire, a trigger), so its
-- fires are admitted by their definition's concurrency limit, rate meter and lane like any enqueued
-- job (docs/schedules.md, "Policies"). Computed where the schedule is written: a worker's
-- declaration (the definition's key functions on the schedule's payload), client.schedules.add.
alter table acta.schedules add column concurrency_key text, add column rate_key text, add column lane text;
