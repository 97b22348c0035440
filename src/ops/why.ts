/*
 * Why a job is not running (docs/operating.md, "acta why"): every cause the database holds, in one
 * statement, each named with its blocker. The claim's rules are acta.claim_jobs' (docs/policies.md):
 * a pause, the due time, the lane's head, the key's slots, the meter's tokens, and a live worker
 * that declares the definition.
 */
import type { Queryable } from '../db/Db';
import type { PauseRecord } from '../db/pauses';
import type { JobId, JobStatus } from '../db/types';
import { WORKER_LIVE_SQL as LIVE } from '../db/workers';

export type WhyCause =
  | 'ended' // Succeeded or Cancelled
  | 'attempts-used-up' // Failed after its last attempt
  | 'failed' // Failed by a final error before its attempts ran out
  | 'running' // Executing on a live worker
  | 'dead-worker' // Executing under a lease its worker no longer renews
  | 'paused' // its namespace or definition is paused
  | 'not-due' // due later
  | 'lane' // another job is its lane's head
  | 'concurrency' // its concurrency key has no free slot
  | 'rate' // its rate meter has no token
  | 'no-worker' // no live worker declares its definition
  | 'signal' // Waiting for a signal (docs/workflows.md)
  | 'children' // Waiting for its child jobs to end
  | 'claimable'; // nothing holds it: the next claim with a free executor takes it

/** One reason, with what holds the job. */
export interface WhyReason {
  cause: WhyCause;
  /** One line for a person. */
  message: string;
  /** The jobs that hold it (a key's slots, the lane's head). */
  blockers?: JobId[];
  /** When it ends, if known (the due time, a lease's end, a meter's next token). */
  until?: Date | null;
  /** The worker it concerns (running on, or leased by). */
  worker?: string | null;
  /**
   * The pause: who, why and since when, as client.pause and client.namespaces name them (one
   * PauseRecord naming for every JSON output: docs/operating.md, "Admin commands"; test/cli.test.ts).
   */
  pause?: PauseRecord;
}

export interface WhyAnswer {
  id: JobId;
  status: JobStatus;
  /** Every cause found, the one to act on first: a pause, the due time, the lane, the key, the meter, the workers. */
  reasons: WhyReason[];
}

interface Facts {
  id: string;
  namespace: string;
  definition: string;
  status: JobStatus;
  now: Date;
  run_at: Date;
  attempts: number;
  max_attempts: number;
  concurrency_key: string | null;
  rate_key: string | null;
  lane: string | null;
  blocked_by: 'lane' | 'concurrency' | 'rate' | null;
  lease_holder: string | null;
  wait_names: string[] | null;
  wait_until: Date | null;
  children_left: string[] | null;
  lease_expires_at: Date | null;
  claimed_at: Date | null;
  finished_at: Date | null;
  cancel_requested_at: Date | null;
  error_message: string | null;
  concurrency_limit: number | null;
  pauses: { definition: string; paused_by: string | null; reason: string | null; paused_at: string }[];
  holder: { hostname: string; pid: number; status: string; last_heartbeat_at: string; build: string | null; silent: boolean } | null;
  key_holders: string[] | null;
  key_held: string | null;
  meter: { room: number | null; next_at: string | null } | null;
  gate_recheck_at: Date | null;
  lane_head: { id: string; status: JobStatus; run_at: string } | null;
  handling: string;
  alive: string;
  silent_handling: string;
  last_beat: Date | null;
  builds_lacking: (string | null)[] | null; // a worker's build, null for one started without --build (last)
  ahead: string;
}

/** The facts of one job, in one statement (index-backed: each probe is by primary key or a policy index of migration 0008). */
const FACTS = `
select j.id::text as id, j.namespace, j.definition, j.status, now() as now, j.run_at, j.attempts,
       coalesce(j.max_attempts, d.max_attempts, 25) as max_attempts,
       j.concurrency_key, j.rate_key, j.lane, j.blocked_by, j.lease_holder, j.lease_expires_at, j.claimed_at, j.finished_at,
       j.cancel_requested_at, left(j.error ->> 'message', 200) as error_message, d.concurrency_limit,
       j.wait_names, j.wait_until,
       case when j.status = 'waiting' and j.wait_names is null then
         (select array_agg(c.id::text order by c.id) from (select c.id from acta.jobs c
            where c.parent_id = j.id and c.status in ('ready', 'executing', 'waiting') order by c.id limit 20) c) end as children_left,
       coalesce((select jsonb_agg(jsonb_build_object('definition', p.definition, 'paused_by', p.paused_by, 'reason', p.reason, 'paused_at', p.paused_at) order by p.definition)
                 from acta.pauses p where p.namespace = j.namespace and p.definition in ('', j.definition)), '[]') as pauses,
       (select jsonb_build_object('hostname', w.hostname, 'pid', w.pid, 'status', w.status, 'last_heartbeat_at', w.last_heartbeat_at, 'build', w.build,
                                  'silent', w.status = 'alive' and not (${LIVE}))
          from acta.workers w where w.id = j.lease_holder) as holder,
       case when j.concurrency_key is not null then
         (select array_agg(k.id::text order by k.id) from (select k.id from acta.jobs k
            where k.namespace = j.namespace and k.concurrency_key = j.concurrency_key and k.status = 'executing' order by k.id limit 20) k) end as key_holders,
       case when j.concurrency_key is not null then
         (select count(*) from acta.jobs k where k.namespace = j.namespace and k.concurrency_key = j.concurrency_key and k.status = 'executing') end as key_held,
       case when j.rate_key is not null then
         (select jsonb_build_object('room', r.room, 'next_at', r.next_at) from acta.gate_room(j.namespace, 'rate', j.rate_key, j.definition, now()) r) end as meter,
       (select g.recheck_at from acta.gates g
          where g.namespace = j.namespace and g.kind = j.blocked_by
            and g.key = case j.blocked_by when 'lane' then j.lane when 'rate' then j.rate_key else j.concurrency_key end) as gate_recheck_at,
       case when j.lane is not null then coalesce(
         (select jsonb_build_object('id', l.id::text, 'status', l.status) from acta.jobs l
            where l.namespace = j.namespace and l.lane = j.lane and l.status in ('executing', 'waiting') order by l.lane_seq limit 1),
         (select jsonb_build_object('id', l.id::text, 'status', l.status, 'run_at', l.run_at) from acta.jobs l
            where l.namespace = j.namespace and l.lane = j.lane and l.status = 'ready'
              and not (l.schedule is not null and l.execution = 0 and l.run_at > now()) order by l.lane_seq limit 1)) end as lane_head,
       (select count(*) from acta.workers w where w.namespace = j.namespace and w.status = 'alive' and ${LIVE} and j.definition = any (w.definitions)) as handling,
       (select count(*) from acta.workers w where w.namespace = j.namespace and w.status = 'alive' and ${LIVE}) as alive,
       (select count(*) from acta.workers w where w.namespace = j.namespace and w.status = 'alive' and not (${LIVE}) and j.definition = any (w.definitions)) as silent_handling,
       (select max(w.last_heartbeat_at) from acta.workers w where w.namespace = j.namespace and w.status = 'alive' and not (${LIVE}) and j.definition = any (w.definitions)) as last_beat,
       (select array_agg(distinct w.build order by w.build) from acta.workers w
          where w.namespace = j.namespace and w.status = 'alive' and ${LIVE} and not j.definition = any (w.definitions)) as builds_lacking,
       case when j.fair_tag is null then
         (select count(*) from (select 1 from acta.jobs a
            where hashtextextended(a.namespace || '/' || a.definition, 0) = hashtextextended(j.namespace || '/' || j.definition, 0)
              and a.namespace = j.namespace and a.definition = j.definition and a.status = 'ready' and a.blocked_by is null and a.fair_tag is null
              and a.run_at <= now()
              and (a.priority > j.priority or (a.priority = j.priority and (a.run_at, a.id) < (j.run_at, j.id)))
            limit 10000) a)
       else
         -- A row with its fair turn: the claim takes them by priority, then turn (jobs_fair_idx).
         (select count(*) from (select 1 from acta.jobs a
            where hashtextextended(a.namespace || '/' || a.definition, 0) = hashtextextended(j.namespace || '/' || j.definition, 0)
              and a.namespace = j.namespace and a.definition = j.definition and a.status = 'ready' and a.blocked_by is null and a.fair_tag is not null
              and (a.priority > j.priority or (a.priority = j.priority and (a.fair_tag, a.id) < (j.fair_tag, j.id)))
            limit 10000) a) end as ahead
from acta.all_jobs j
left join acta.definitions d on d.namespace = j.namespace and d.name = j.definition
where j.id = $2::bigint and j.namespace = $1`;

/** Why job `id` of `namespace` is where it is; null when the namespace has no such job. */
export async function why(q: Queryable, namespace: string, id: string): Promise<WhyAnswer | null> {
  const { rows } = await q.query<Facts>(FACTS, [namespace, id]);
  return rows.length === 0 ? null : diagnose(rows[0]);
}

const iso = (d: Date | string | null) => (d === null ? 'never' : new Date(d).toISOString());

/** The reasons the facts give (see WhyAnswer.reasons for the order). */
export function diagnose(f: Facts): WhyAnswer {
  const reasons: WhyReason[] = [];
  const add = (r: WhyReason) => reasons.push(r);
  const now = new Date(f.now).getTime();
  switch (f.status) {
    case 'succeeded':
    case 'cancelled':
      add({ cause: 'ended', message: `ended ${f.status} at ${iso(f.finished_at)}` });
      break;
    case 'failed':
      if (f.attempts >= f.max_attempts) add({ cause: 'attempts-used-up', message: `failed: attempts used up (${f.attempts} of ${f.max_attempts}); last error: ${f.error_message ?? 'none stored'}` });
      else add({ cause: 'failed', message: `failed by a final error after ${f.attempts} of ${f.max_attempts} attempts: ${f.error_message ?? 'none stored'}` });
      break;
    case 'executing': {
      const h = f.holder;
      const expired = f.lease_expires_at !== null && new Date(f.lease_expires_at).getTime() < now;
      const who = h ? `${f.lease_holder} (${h.hostname} pid ${h.pid}${h.build ? `, build ${h.build}` : ''})` : `${f.lease_holder} (not in the membership list)`;
      if (!h || h.status !== 'alive' || h.silent || expired) {
        const state = h ? (h.silent ? 'silent past 7 heartbeats (gone, not yet marked dead)' : h.status) : 'unknown';
        // A recovery pass runs in a live worker's heartbeat: with none left, nothing returns it.
        const returns = Number(f.alive) === 0 ? `no live worker is left in namespace "${f.namespace}" to run the recovery pass: it returns once a worker starts there` : 'the next recovery pass after the lease returns it';
        add({
          cause: 'dead-worker',
          message: `leased by worker ${who}, ${h ? `${state}, last heartbeat ${iso(h.last_heartbeat_at)}` : state}, ${expired ? 'lease expired at' : 'until'} ${iso(f.lease_expires_at)}: ${returns}`,
          worker: f.lease_holder,
          until: f.lease_expires_at,
        });
      } else {
        const cancel = f.cancel_requested_at ? `; cancel requested at ${iso(f.cancel_requested_at)}` : '';
        add({ cause: 'running', message: `running on worker ${who} since ${iso(f.claimed_at)}, lease until ${iso(f.lease_expires_at)}${cancel}`, worker: f.lease_holder, until: f.lease_expires_at });
      }
      break;
    }
    case 'waiting':
      // A parked workflow (docs/workflows.md): a signal wait names its signals and timeout, a
      // children wait the children not ended yet (the first 20).
      if (f.wait_names !== null) {
        const names = f.wait_names.map((n) => `"${n}"`).join(' or ');
        add({ cause: 'signal', message: `waiting for signal ${names}${f.wait_until ? `, until ${iso(f.wait_until)} (then its wait times out)` : ''}: client.signal or acta signal sends one`, until: f.wait_until });
      } else {
        const left = f.children_left ?? [];
        add({ cause: 'children', message: `waiting for ${left.length >= 20 ? 'at least 20' : left.length} child job(s) to end${left.length ? `: ${left.join(', ')}` : ''}`, blockers: left });
      }
      break;
    case 'ready':
      readyReasons(f, now, add);
      if (reasons.length === 0) {
        const ahead = Number(f.ahead);
        add({ cause: 'claimable', message: `claimable now: the next claim with a free executor takes it (${ahead >= 10_000 ? 'at least 10,000' : ahead} due jobs of "${f.definition}" ahead of it)` });
      }
      break;
  }
  return { id: f.id, status: f.status, reasons };
}

function readyReasons(f: Facts, now: number, add: (r: WhyReason) => void): void {
  for (const p of f.pauses) {
    const scope = p.definition === '' ? `namespace "${f.namespace}"` : `definition "${p.definition}"`;
    add({
      cause: 'paused',
      message: `${scope} paused by ${p.paused_by ?? 'someone unnamed'} since ${iso(p.paused_at)}${p.reason ? ` (${p.reason})` : ''}`,
      pause: { namespace: f.namespace, definition: p.definition === '' ? null : p.definition, pausedBy: p.paused_by, reason: p.reason, pausedAt: new Date(p.paused_at) },
    });
  }
  if (new Date(f.run_at).getTime() > now) add({ cause: 'not-due', message: `not due until ${iso(f.run_at)}`, until: f.run_at });
  if (f.lane !== null && f.lane_head !== null && f.lane_head.id !== f.id) {
    // A Ready head due later holds its lane until then (docs/policies.md, "Lanes": due time does not
    // reorder a lane), e.g. a job enqueued with runAt: say until when. A schedule's armed fire not yet due
    // is no head (lane_head above leaves it out, as the claim does).
    const head = f.lane_head;
    const later = head.status === 'ready' && head.run_at !== undefined && new Date(head.run_at).getTime() > now ? new Date(head.run_at) : null;
    add({
      cause: 'lane',
      message: `lane "${f.lane}": its head is job ${head.id} (${head.status}${later ? `, not due until ${iso(later)}` : ''})`,
      blockers: [head.id],
      ...(later ? { until: later } : {}),
    });
  }
  if (f.concurrency_key !== null && f.concurrency_limit !== null) {
    const held = Number(f.key_held ?? 0);
    if (held >= f.concurrency_limit) {
      // key_holders: the first 20 (FACTS), so more held than named ends with '…'.
      const holders = f.key_holders ?? [];
      const by = `${holders.length === 1 ? 'job' : 'jobs'} ${holders.join(', ')}${held > holders.length ? ', …' : ''}`;
      add({ cause: 'concurrency', message: `concurrency key "${f.concurrency_key}" full: ${held} of ${f.concurrency_limit} slots held by ${by}`, blockers: holders });
    } else if (f.blocked_by === 'concurrency') {
      add({ cause: 'concurrency', message: `parked on concurrency key "${f.concurrency_key}" (${held} of ${f.concurrency_limit} slots held), reconsidered at ${iso(f.gate_recheck_at)} or when a slot is handed on`, blockers: f.key_holders ?? [], until: f.gate_recheck_at });
    }
  }
  if (f.rate_key !== null && f.meter !== null && f.meter.room !== null && (f.meter.room <= 0 || f.blocked_by === 'rate')) {
    const until = f.meter.room <= 0 ? f.meter.next_at : f.gate_recheck_at;
    add({ cause: 'rate', message: `rate meter "${f.rate_key}" shut until ${iso(until)}`, until: until === null ? null : new Date(until) });
  }
  const handling = Number(f.handling);
  if (handling === 0) {
    const lacking = f.builds_lacking ?? [];
    const silent = Number(f.silent_handling);
    const gone = silent > 0 ? ` (${silent} worker${silent === 1 ? '' : 's'} declaring it listed alive but silent past 7 heartbeats, the last beat at ${iso(f.last_beat)}: gone)` : '';
    add({
      cause: 'no-worker',
      message:
        Number(f.alive) === 0
          ? `no live worker in namespace "${f.namespace}"${gone}`
          : `no live worker handles definition "${f.definition}": the live ones (${lacking.map((b) => (b === null ? 'no build' : `build ${b}`)).join(', ')}) lack it${gone}`,
    });
  }
  if (f.blocked_by === 'lane' && !(f.lane !== null && f.lane_head !== null && f.lane_head.id !== f.id)) {
    add({ cause: 'lane', message: `parked on lane "${f.lane}", to be handed on at ${iso(f.gate_recheck_at)}`, until: f.gate_recheck_at });
  }
}

export type { Facts as WhyFacts };
