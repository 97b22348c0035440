-- acta.pause: stop the claims of a namespace (p_definition null) or of one of its definitions.
--
-- Contract: stores the pause in acta.pauses with who (p_by) and why (p_reason), on the database
-- clock; every claim of that scope from this commit on takes nothing (acta.claim_jobs), and
-- NOTIFY acta_jobs wakes the namespace's workers, so an idle claimer sees it at once and a busy
-- one at its next claim. Running attempts finish. A scope paused already stays as it was paused
-- (the first who, why and since stand): returns that row, with created false.
-- Locks: the pause's row (primary key).
drop function if exists acta.pause(text, text, text, text);
create or replace function acta.pause(p_namespace text, p_definition text, p_by text, p_reason text)
returns table (paused_by text, reason text, paused_at timestamptz, created boolean)
language plpgsql
as $$
#variable_conflict use_column
begin
  perform pg_notify('acta_jobs', p_namespace);
  return query
  with ins as (
    insert into acta.pauses as p (namespace, definition, paused_by, reason)
    values (p_namespace, coalesce(p_definition, ''), p_by, p_reason)
    on conflict (namespace, definition) do nothing
    returning p.paused_by, p.reason, p.paused_at
  )
  select i.paused_by, i.reason, i.paused_at, true from ins i
  union all
  select p.paused_by, p.reason, p.paused_at, false from acta.pauses p
  where p.namespace = p_namespace and p.definition = coalesce(p_definition, '') and not exists (select 1 from ins);
end
$$;
