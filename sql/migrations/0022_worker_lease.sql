-- 0022_worker_lease: each worker's lease (4 H, in ms), as it declared it at registration
-- (acta.register_worker), so a reader can tell a worker that stopped beating from a live one
-- without a recovery pass: silent past 7 H (1.75 leases) it is gone, though only a live worker's
-- recovery pass marks it dead (docs/operating.md, "acta why"; src/ops/why.ts). Null: a worker
-- registered before this migration.
alter table acta.workers add column lease_ms integer;
