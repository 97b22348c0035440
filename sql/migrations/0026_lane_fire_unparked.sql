-- 0026_lane_fire_unparked: a schedule's armed fire not yet due holds no place in its lane
-- (docs/policies.md, "Lanes"; sql/functions/claim_jobs.sql and release_gate.sql leave it out of the
-- lane's order). Before, a claim that refused a lane whole parked such a fire behind the lane's
-- head; a hand-on now passes a fire not yet due, so one left parked by that would wait for a later
-- hand-on of its lane, or for ever in a lane nothing else runs in. Unparked here: such a fire is
-- claimed at its instant like any due row. Reads acta.jobs along jobs_schedule_fire_idx (fire rows
-- only).
update acta.jobs
set blocked_by = null
where schedule is not null and status = 'ready' and blocked_by = 'lane' and execution = 0 and run_at > now();
