-- acta.gate_lock: the advisory lock that serializes everything done to one gate: a lane, a
-- concurrency key or a rate meter of a namespace (docs/DESIGN.md, "Policies"; migration 0008).
--
-- Contract: a bigint for pg_advisory_xact_lock, the same for the same (namespace, kind, key). Two
-- gates whose texts hash alike share a lock, which only serializes them more.
-- Who takes it: a claim, for every gate its candidates pass (admission, and the recheck of a gate
-- whose time has come); a completion and a recovery pass, for the gates of the attempts they end
-- (the hand-on); a cancel, for the lane of the row it cancels. Held until commit, so a claim that
-- counts a key's attempts, or parks a row on it, sees every hand-on committed before it, and a
-- hand-on sees every row parked before it (acta.release_gate).
-- Lock order: a transaction takes gate locks in increasing number and waits only for one above
-- every gate lock it holds; out of order it only tries (acta.claim_jobs, "Locks"): no deadlock
-- among gates. Row locks come first: a gate lock is never held while waiting for a row that a
-- transaction waiting for that gate holds (acta.cancel_job hands a lane on only for a row that
-- was not parked).
create or replace function acta.gate_lock(p_namespace text, p_kind text, p_key text) returns bigint
language sql immutable parallel safe
as $$ select hashtextextended(p_kind || '/' || p_namespace || '/' || p_key, 0) $$;
