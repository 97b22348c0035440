#!/bin/bash
# Instructions the PostgreSQL server executes per job for acta's claim + completion, counted by
# valgrind's callgrind: repeatable to a few instructions per job, whatever else the machine does
# (wall-clock and CPU-time figures of the same SQL swing ±30 % on this shared VM). For judging a
# change to the SQL: run it with and without the change.
#
#   bash bench/server-instructions.sh [variant.sql] [iterations=20] [rows per claim=128]
#   ACTA_CLAIM_ONLY=1 bash bench/server-instructions.sh …   (the claims alone)
#   ACTA_DONE_QUERY='select count(*) from …' bash bench/server-instructions.sh variant.sql …
#       (how the loop's succeeded jobs are counted, for a variant that keeps them elsewhere)
#   ACTA_ENQUEUE_ONLY=1 bash bench/server-instructions.sh [variant.sql] [iterations] [rows]
#       (one enqueue_jobs call of iterations × rows jobs, against one of 10: instructions per enqueued job)
#   ACTA_FRESH=1 bash bench/server-instructions.sh …   (no VACUUM ANALYZE after the enqueue: the bench's fresh table)
#   ACTA_KEYS=1000 bash bench/server-instructions.sh …   (jobs round-robin over 1,000 concurrency keys of limit 1)
#   ACTA_PEER=graphile-worker bash bench/server-instructions.sh "" [iterations] [rows]
#       (the same loop with graphile-worker's own SQL, bench/'s version: its batched get-jobs query and
#       its batched delete of completed jobs, as its perf preset sends them: the same count for the peer)
#
# It makes a throwaway cluster (initdb, as the `postgres` user when run as root), installs acta's
# schema with this checkout's migrator (`npm run build` first), applies variant.sql if given (e.g.
# a changed sql/functions/claim_jobs.sql, or an ALTER), then runs `postgres --single` under
# callgrind twice: setup only (enqueue iterations × rows jobs, VACUUM ANALYZE), and setup plus a
# loop of claim_jobs(rows) + complete_executions (every job succeeded), one transaction per
# iteration, as bench scenario 7 does, by a worker registered as a worker is (its acta.workers row). Prints the loop's instructions per job (the difference),
# and leaves the callgrind files in the work directory for `callgrind_annotate`.
# Needs: valgrind, PostgreSQL's server binaries (pg_config --bindir, else /usr/lib/postgresql/*/bin).
set -euo pipefail
VARIANT=${1:-}
ITER=${2:-20}
LIM=${3:-128}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$( (pg_config --bindir 2>/dev/null) || ls -d /usr/lib/postgresql/*/bin | tail -1)
[ -x "$BIN/postgres" ] || BIN=$(ls -d /usr/lib/postgresql/*/bin | tail -1)
WORK=$(mktemp -d /tmp/acta-instructions.XXXXXX)
PORT=$((55600 + RANDOM % 300))
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else bash -c "$1"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$WORK"
as_pg "'$BIN/initdb' -D '$WORK/data' -A trust -U postgres >'$WORK/initdb.log' 2>&1"
as_pg "'$BIN/pg_ctl' -D '$WORK/data' -o '-p $PORT -k $WORK -c listen_addresses=127.0.0.1' -l '$WORK/pg.log' -w start >/dev/null"
trap 'as_pg "\"$BIN/pg_ctl\" -D \"$WORK/data\" -m immediate stop" >/dev/null 2>&1 || true' EXIT
as_pg "'$BIN/psql' -h 127.0.0.1 -p $PORT -U postgres -qc 'create database acta_instructions' postgres"
if [ "${ACTA_PEER:-}" = graphile-worker ]; then
  (cd "$ROOT/bench" && node --input-type=module -e "
import { createRequire } from 'node:module';
const { runMigrations } = createRequire(process.cwd() + '/package.json')('graphile-worker');
await runMigrations({ connectionString: 'postgres://postgres@127.0.0.1:$PORT/acta_instructions' });")
else
(cd "$ROOT" && node -e "
const A = require('./dist/src');
(async () => { const db = A.createPgDb({ connectionString: 'postgres://postgres@127.0.0.1:$PORT/acta_instructions' }); await A.migrate(db); await db.close(); })()
  .catch((e) => { console.error(e); process.exit(1); });")
fi
as_pg "'$BIN/pg_ctl' -D '$WORK/data' -w stop >/dev/null"
trap - EXIT

N=$((ITER * LIM + 10))
# ACTA_CLAIM_ONLY=1: the loop claims and completes nothing (the count check then expects no success).
COMPLETE="perform acta.complete_executions(w, ids, execs, array_fill('succeeded'::text, array[cardinality(ids)]), array_fill('null'::jsonb, array[cardinality(ids)]), array_fill(null::jsonb, array[cardinality(ids)]), array_fill(0, array[cardinality(ids)]));"
EXPECT=$((ITER * LIM))
if [ "${ACTA_CLAIM_ONLY:-}" = 1 ]; then COMPLETE=''; EXPECT=0; fi
if [ "${ACTA_ENQUEUE_ONLY:-}" = 1 ]; then EXPECT=$N; fi
# ACTA_KEYS=K: definition d has a concurrency limit of 1 and job g the key k<g mod K> (bench's `keys`).
KEYS=${ACTA_KEYS:-}
keyed() { if [ -n "$KEYS" ]; then printf "array(select 'k' || (g %% %d) from generate_series(1, %d) g)" "$KEYS" "$1"; else printf null; fi; }
enqueue() { printf "select count(*) from acta.enqueue_jobs('default', array_fill('d'::text, array[%d]), (select jsonb_agg(jsonb_build_object('n', g)) from generate_series(1, %d) g), null, null, null, null, %s, null, null);\n\n" "$1" "$1" "$(keyed "$1")"; }
script() { # $1: 0 setup, 1 setup + loop, 2 setup + loop + a count of the succeeded jobs (run without valgrind)
  if [ "${ACTA_ENQUEUE_ONLY:-}" = 1 ]; then # 0: 10 jobs; 1: 10 jobs, then N - 10; 2: the same and a count
    {
      if [ -n "$VARIANT" ]; then grep -v '^[[:space:]]*$' "$VARIANT"; printf '\n\n'; fi
      enqueue 10
      if [ "$1" != 0 ]; then enqueue $((N - 10)); fi
      if [ "$1" = 2 ]; then printf "select count(*) from acta.jobs where status = 'ready';\n\n"; fi
    } > "$WORK/script$1.sql"
    return
  fi
  if [ "${ACTA_PEER:-}" = graphile-worker ]; then # graphile-worker 0.18's getJobs (batch, named-queue strategy 2, no flags) and completeJobs
    {
      printf "select count(*) from (select graphile_worker.add_job('d', json_build_object('n', g)) from generate_series(1, %d) g) x;\n\n" "$N"
      printf 'vacuum analyze graphile_worker._private_jobs;\n\n'
      if [ "$1" != 0 ]; then
        printf "do \$loop\$ declare ids bigint[]; t int[] := array(select id from graphile_worker._private_tasks where identifier = 'd'); begin for i in 1..%d loop with j_raw as (select jobs.job_queue_id, jobs.priority, jobs.run_at, jobs.id from graphile_worker._private_jobs as jobs where jobs.is_available = true and run_at <= now() and task_id = any(t) and (jobs.job_queue_id is null or jobs.job_queue_id in (select id from graphile_worker._private_job_queues as job_queues where job_queues.is_available = true for update skip locked)) order by priority asc, run_at asc limit %d for update skip locked), j as (select distinct on (job_queue_id, case when job_queue_id is null then id end) job_queue_id, priority, run_at, id from j_raw order by job_queue_id, case when job_queue_id is null then id end, priority asc, run_at asc), q as (update graphile_worker._private_job_queues as job_queues set locked_by = 'instructions', locked_at = now() from j where job_queues.id = j.job_queue_id), u as (update graphile_worker._private_jobs as jobs set attempts = jobs.attempts + 1, locked_by = 'instructions', locked_at = now() from j where jobs.id = j.id returning jobs.*) select array_agg(u.id) into ids from u; %s commit; end loop; end \$loop\$;\n\n" "$ITER" "$LIM" "$([ -n "$COMPLETE" ] && echo 'delete from graphile_worker._private_jobs as jobs using unnest(ids) n(n) where id = n;')"
      fi
      # What the loop left: the jobs it did not take (its completed ones are deleted).
      if [ "$1" = 2 ]; then printf "select %d - count(*) as count from graphile_worker._private_jobs;\n\n" "$N"; fi
    } > "$WORK/script$1.sql"
    return
  fi
  {
    # postgres --single -j ends a statement at a semicolon followed by an empty line: the variant
    # goes in as one chunk, without its empty lines (a function body may hold such a pair).
    if [ -n "$VARIANT" ]; then grep -v '^[[:space:]]*$' "$VARIANT"; printf '\n\n'; fi
    if [ -n "$KEYS" ]; then
      printf "insert into acta.namespaces (name) values ('default') on conflict do nothing;\n\n"
      printf "insert into acta.definitions (namespace, name, concurrency_limit) values ('default', 'd', 1);\n\n"
    fi
    enqueue "$N"
    # ACTA_FRESH=1: no VACUUM ANALYZE after the enqueue (the bench's "fresh table" variant).
    if [ "${ACTA_FRESH:-}" != 1 ]; then printf 'vacuum analyze acta.jobs;\n\n'; fi
    # No resumed scan (claim_jobs.sql): under valgrind every pick is slower than its 5 ms trigger,
    # so whether a claim resumes would follow the machine's speed, not the SQL.
    printf "set acta.claim_resume_after_ms = 'Infinity';\n\n"
    if [ "$1" != 0 ]; then
      printf "do \$loop\$ declare w uuid := gen_random_uuid(); ids bigint[]; execs integer[]; begin insert into acta.workers (id, namespace, hostname, pid, definitions) values (w, 'default', 'instructions', 1, array['d']); for i in 1..%d loop select array_agg(c.job_id), array_agg(c.execution) into ids, execs from acta.claim_jobs('default', w, array['d'], %d, 180000) c where c.job_id is not null; %s commit; end loop; end \$loop\$;\n\n" "$ITER" "$LIM" "$COMPLETE"
    fi
    if [ "$1" = 2 ]; then printf "%s;\n\n" "${ACTA_DONE_QUERY:-select count(*) from acta.all_jobs where status = 'succeeded'}"; fi
  } > "$WORK/script$1.sql"
}
instructions() { # $1: 0 or 1
  rm -rf "$WORK/run" && cp -a "$WORK/data" "$WORK/run"
  as_pg "valgrind --tool=callgrind --callgrind-out-file='$WORK/callgrind.$1' '$BIN/postgres' --single -j -D '$WORK/run' acta_instructions < '$WORK/script$1.sql' > '$WORK/single.$1.log' 2>&1"
  if grep -q 'ERROR' "$WORK/single.$1.log"; then echo "errors in $WORK/single.$1.log:" >&2; grep ERROR "$WORK/single.$1.log" >&2; exit 1; fi
  callgrind_annotate "$WORK/callgrind.$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}
script 0
script 1
script 2
rm -rf "$WORK/run" && cp -a "$WORK/data" "$WORK/run"
as_pg "'$BIN/postgres' --single -j -D '$WORK/run' acta_instructions < '$WORK/script2.sql' > '$WORK/single.2.log' 2>&1"
DONE=$(grep -o 'count = "[0-9]*"' "$WORK/single.2.log" | tail -1 | grep -o '[0-9]*' || true)
[ "$DONE" = "$EXPECT" ] || { echo "the loop completed ${DONE:-?} jobs, expected $EXPECT: see $WORK/single.2.log" >&2; exit 1; }
A=$(instructions 0)
B=$(instructions 1)
if [ "${ACTA_ENQUEUE_ONLY:-}" = 1 ]; then
  echo "${VARIANT:-HEAD} · enqueue_jobs of $((N - 10)) jobs: $(( (B - A) / (N - 10) )) instructions per enqueued job in the server (files in $WORK)"
else
  echo "${VARIANT:-HEAD} · $ITER × claim($LIM)${COMPLETE:+ + completion}: $(( (B - A) / (ITER * LIM) )) instructions per job in the server (loop $((B - A)); files in $WORK)"
fi
