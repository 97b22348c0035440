-- 0011_rate_meter: a rate meter's claim costs the same whatever its window holds (docs/policies.md,
-- "Rate limits"; docs/decisions/2026-12-05-rate-meter.md).
--
-- The rule is unchanged: no window of rate_per_ms holds more than rate_limit starts of a key. Its
-- log was one array of start times per meter (acta.gates.stamps) that every claim of the key read,
-- sorted and rewrote: a claim's cost grew with the starts in the window. The log is now one row per
-- (meter, admitting claim) in acta.meter_starts, numbered by the meter's running count of starts, so
-- "how many starts since t" is the meter's count less one row's, found by one index probe; and "when
-- the start n back leaves the window" is one probe by number (rows are added in time order under the meter's lock, so count and time
-- rise together). The claims delete the rows before the
-- window but its last one; acta.gates.starts_pruned is the count up to the last row deleted.
create table acta.meter_starts (
  namespace text not null,
  key       text not null,
  -- An admission instant (its rows' claimed_at): one row per instant, two claims at one merged.
  at        timestamptz not null,
  -- The meter's count of starts up to and including this instant's.
  upto      bigint not null,
  primary key (namespace, key, at)
);
-- The row where the count reaches a number (the start that must leave the window for a token).
create index meter_starts_upto_idx on acta.meter_starts (namespace, key, upto);

alter table acta.gates
  -- Rate meters: every start counted (the newest meter_starts row's upto), and the count up to
  -- the last row deleted (every row up to it is deleted).
  add column starts        bigint not null default 0,
  add column starts_pruned bigint not null default 0;

-- The logs as they stand: one row per distinct instant, numbered in time order.
insert into acta.meter_starts (namespace, key, at, upto)
select s.namespace, s.key, s.at, sum(s.n) over (partition by s.namespace, s.key order by s.at)
from (select g.namespace, g.key, t.at, count(*) as n
      from acta.gates g cross join unnest(g.stamps) as t(at)
      where g.kind = 'rate'
      group by g.namespace, g.key, t.at) s;
update acta.gates g set starts = cardinality(g.stamps) where g.kind = 'rate';

alter table acta.gates drop column stamps;
