// The Ledger's contract (contract.ts) on the SQL functions, on a real server: sqlLedger(db).
// Each test starts on an empty schema, as a new in-memory ledger does, and moves the clock by
// moving every stored time of the database into the past.
import { sqlLedger } from '../../src/ledger';
import { useTestDatabase } from '../helpers/db';
import { ledgerContract } from './contract';

const { db } = useTestDatabase();

/** Migration 0001's namespace and 0007's recovery pass, as a fresh schema has them (delete: a truncate of these costs ~0.1 s a test). */
const EMPTY = `delete from acta.jobs; delete from acta.succeeded_jobs; delete from acta.executions; delete from acta.steps; delete from acta.gates; delete from acta.meter_starts; delete from acta.workers;
delete from acta.definitions; delete from acta.passes; delete from acta.namespaces; delete from acta.pauses; delete from acta.signals; delete from acta.schedules; delete from acta.outbox;
select setval(pg_get_serial_sequence('acta.jobs', 'id'), 1, false);
insert into acta.namespaces (name) values ('default');
insert into acta.passes (namespace, pass) values ('default', 'recovery');`;

/** Every stored time, `$1` earlier: as if the database's clock had moved on. */
const SHIFTS = [
  `update acta.jobs set run_at = run_at - $1::interval, lease_expires_at = lease_expires_at - $1::interval, claimed_at = claimed_at - $1::interval,
                        created_at = created_at - $1::interval, finished_at = finished_at - $1::interval,
                        wait_until = wait_until - $1::interval`,
  // A success moved out of acta.jobs (migration 0023) keeps its times here.
  `update acta.succeeded_jobs set run_at = run_at - $1::interval, lease_expires_at = lease_expires_at - $1::interval, claimed_at = claimed_at - $1::interval,
                                  created_at = created_at - $1::interval, finished_at = finished_at - $1::interval,
                                  wait_until = wait_until - $1::interval`,
  `update acta.executions set claimed_at = claimed_at - $1::interval, finished_at = finished_at - $1::interval`,
  `update acta.steps set recorded_at = recorded_at - $1::interval`,
  `update acta.gates set recheck_at = recheck_at - $1::interval, shut_until = shut_until - $1::interval`,
  // Its primary key holds one row per (meter, instant): moved in two steps, each to instants no row has.
  `update acta.meter_starts set at = at - $1::interval - interval '1000 years'`,
  `update acta.meter_starts set at = at + interval '1000 years'`,
  `update acta.workers set started_at = started_at - $1::interval, last_heartbeat_at = last_heartbeat_at - $1::interval, stopped_at = stopped_at - $1::interval`,
  `update acta.definitions set registered_at = registered_at - $1::interval`,
  `update acta.namespaces set created_at = created_at - $1::interval`,
  `update acta.passes set due_at = due_at - $1::interval`,
  // A fire's instant is unique per schedule (jobs_schedule_fire_idx): moved in two steps, as above.
  `update acta.jobs set scheduled_at = scheduled_at - $1::interval - interval '1000 years' where schedule is not null`,
  `update acta.jobs set scheduled_at = scheduled_at + interval '1000 years' where schedule is not null`,
  `update acta.schedules set next_fire_at = next_fire_at - $1::interval, last_fire_at = last_fire_at - $1::interval,
                             created_at = created_at - $1::interval, updated_at = updated_at - $1::interval`,
];

ledgerContract(async () => {
  await db.query(EMPTY);
  return {
    ledger: sqlLedger(db),
    now: async () => (await db.query<{ now: Date }>('select now() as now')).rows[0].now.getTime(),
    advance: (ms) =>
      db.transaction(async (tx) => {
        for (const shift of SHIFTS) await tx.query(shift, shift.includes('$1') ? [`${ms} milliseconds`] : []);
      }),
  };
});
