-- 0017_executions_finished_idx: the attempt ledger by the time its attempts finished, for the
-- dashboard's throughput and failure charts (src/ops/dashboard/queries.ts, per minute of a window).
--
-- BRIN, not btree: acta.executions is append-only (one insert per attempt, never updated) and its
-- rows are written in about the order they finish, so a block range's min/max of finished_at is a
-- tight summary; the index is a few pages per million rows, and an insert into a range not yet
-- summarized writes nothing to it (autosummarize summarizes it later; a scan reads such ranges
-- whole, so the newest attempts are always counted). A btree would add an index entry to every
-- completion's insert on the hot path. test/dashboard/plans.test.ts reads the chart's plan.
create index executions_finished_idx on acta.executions using brin (finished_at) with (autosummarize = on);
