-- 0018_outbox: the transactional outbox (docs/outbox.md; docs/DESIGN.md, "Workflows": sys.outbox).
--
-- One row per published event (acta.publish_events), written in the publisher's transaction: it
-- exists at its commit, never after a rollback. sys.outbox's fan-out (acta.fan_out_events) turns
-- each into one job per subscribed definition and deletes it in the same transaction, so the table
-- holds only events not yet fanned out. Nothing else refers to a row; ids are never reused.
create table acta.outbox (
  id           bigint generated always as identity primary key,
  namespace    text not null,
  topic        text not null,
  -- Events of one key reach each subscriber in id order (one lane per subscriber and key).
  key          text,
  message      jsonb not null,
  published_at timestamptz not null default now()
);

-- The fan-out's order: a namespace's events, oldest id first.
create index outbox_namespace_idx on acta.outbox (namespace, id);
