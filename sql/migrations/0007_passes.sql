-- 0007_passes: periodic passes as data. A pass (today: recovery; to come: schedules, retention)
-- is one row per (namespace, pass) whose due time the heartbeat that finds it due moves one
-- interval on in the same statement (acta.take_passes), so exactly one worker runs each pass and
-- a new pass adds a row and a function, not new wiring (docs/DESIGN.md, "Workflows"; "The lease
-- clock": recovery interval = lease). The recovery pass's clock moves here from acta.namespaces.
create table acta.passes (
  namespace  text not null references acta.namespaces (name),
  pass       text not null,
  due_at     timestamptz not null default now(),
  primary key (namespace, pass)
);

insert into acta.passes (namespace, pass, due_at)
select name, 'recovery', recovery_due_at from acta.namespaces;

drop function if exists acta.take_recovery_pass(text, integer);
drop function if exists acta.release_recovery_pass(text);
alter table acta.namespaces drop column recovery_due_at;
