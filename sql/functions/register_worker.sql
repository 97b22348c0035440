-- acta.register_worker: put a new worker incarnation in the membership list (creating its
-- namespace on first use). Each process start registers a fresh id, so a restarted process never
-- renews its previous incarnation's rows.
--
-- Contract: the registration is the worker's first beat (docs/DESIGN.md, "The lease clock";
-- docs/decisions/2026-12-01-registration-is-the-first-beat.md): it takes the namespace's passes
-- that are due among the worker's p_passes (acta.take_passes, intervals p_pass_intervals_ms) and
-- returns the names it took.
-- Repeatable: the worker repeats the call when its answer is lost, and the id is this
-- incarnation's own, so a row already there is that earlier call's, which may have taken the pass:
-- a repeat answers every pass (run them: a pass is a sweep that may run any time) without taking
-- one (test/db/core.test.ts, "a registration whose answer was lost is repeated").
-- Definitions: p_max_attempts runs in parallel with p_definitions (null: the default); p_policies
-- holds each definition's whole policy by name, p_build the worker's build (any text; null: not
-- declared). The worker row keeps them, and each definition's policy in acta.definitions is
-- what the live workers declare (acta.refresh_definitions: the newest, with the strictest limits
-- while builds disagree; migrations 0004 and 0008). p_lease_ms, the worker's lease (4 H), is kept on
-- its row: silent past 1.75 leases (7 H) it is gone (migration 0022; src/ops/why.ts); null (a worker
-- of a version before migration 0022, which does not pass it, during a rolling upgrade): counted live.
-- Locks: the acta.definitions rows, inserted and updated in name order (two workers starting at
-- once take them in the same order); the namespace's row when a policy changed; the pass rows it
-- takes; then, when a policy changed, gate rows (acta.recheck_gates: a limit that changed applies
-- at once to the rows parked under the old one), last.
drop function if exists acta.register_worker(uuid, text, text, integer, text[]);
drop function if exists acta.register_worker(uuid, text, text, integer, text[], integer[]);
drop function if exists acta.register_worker(uuid, text, text, integer, text[], integer[], integer);
drop function if exists acta.register_worker(uuid, text, text, integer, text[], integer[], text[], integer[]);
drop function if exists acta.register_worker(uuid, text, text, integer, text[], integer[], text[], integer[], text, jsonb);
create or replace function acta.register_worker(
  p_worker            uuid,
  p_namespace         text,
  p_hostname          text,
  p_pid               integer,
  p_definitions       text[],
  p_max_attempts      integer[],
  p_passes            text[],
  p_pass_intervals_ms integer[],
  p_build             text,
  p_policies          jsonb,
  p_lease_ms          integer default null
) returns text[]
language plpgsql as $$
declare
  v_repeat  boolean;
  v_version bigint;
  v_passes  text[];
begin
  insert into acta.namespaces (name) values (p_namespace) on conflict do nothing;
  insert into acta.workers (id, namespace, hostname, pid, definitions, max_attempts, build, policies, lease_ms)
  values (p_worker, p_namespace, p_hostname, p_pid, p_definitions, p_max_attempts, p_build, p_policies, p_lease_ms)
  on conflict (id) do nothing;
  v_repeat := not found;
  insert into acta.definitions (namespace, name)
  select p_namespace, d.name from unnest(p_definitions) as d(name)
  order by d.name
  on conflict (namespace, name) do nothing;
  select n.policy_version into v_version from acta.namespaces n where n.name = p_namespace;
  perform acta.refresh_definitions(p_namespace, p_definitions);
  if v_repeat then
    v_passes := p_passes; -- see Repeatable
  else
    v_passes := array(select acta.take_passes(p_namespace, p_passes, p_pass_intervals_ms));
  end if;
  -- A policy that changed applies at once to the rows parked under the old one; last (its Locks).
  if exists (select 1 from acta.namespaces n where n.name = p_namespace and n.policy_version is distinct from v_version) then
    perform acta.recheck_gates(p_namespace, p_definitions);
  end if;
  return v_passes;
end
$$;
