-- 0020_schedule_priority: a schedule's priority, copied onto each fire it arms (acta.arm_schedules,
-- acta.complete_executions' recurring fire, a trigger), so a fire can be claimed ahead of a backlog
-- due before its instant (docs/schedules.md; docs/decisions/2026-12-05-recurring-priority-and-retention-default.md).
alter table acta.schedules add column priority integer not null default 0;
