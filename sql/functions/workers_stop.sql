-- acta.stop_worker: mark a worker incarnation stopped after a graceful shutdown (its rows have
-- been completed or handed back by then). Returns whether the worker row existed.
create or replace function acta.stop_worker(p_worker uuid) returns boolean
language plpgsql as $$
begin
  update acta.workers set status = 'stopped', stopped_at = now() where id = p_worker;
  return found;
end
$$;
