-- acta.resume: lift the pause of a namespace (p_definition null) or of one of its definitions.
--
-- Contract: deletes that scope's row of acta.pauses (a namespace's resume leaves its definitions'
-- own pauses standing, and the other way round) and, when there was one, wakes the namespace's
-- workers at commit (NOTIFY acta_jobs), so their claimers claim at once. Returns true when the
-- scope was paused.
-- Locks: the pause's row.
drop function if exists acta.resume(text, text);
create or replace function acta.resume(p_namespace text, p_definition text) returns boolean
language plpgsql
as $$
begin
  delete from acta.pauses p where p.namespace = p_namespace and p.definition = coalesce(p_definition, '');
  if not found then
    return false;
  end if;
  perform pg_notify('acta_jobs', p_namespace);
  return true;
end
$$;
