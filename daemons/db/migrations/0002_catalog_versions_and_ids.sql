-- The catalog's own columns and counters (the catalog part of issue 22; see
-- daemons/db/src/catalog/mod.rs and docs/catalog.md).
--
-- `version`: bumped by every write of a record, so a curator's rewrite applies only to
-- the record it read (the database's counterpart of a znode version).
ALTER TABLE episodes ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE clips ADD COLUMN version BIGINT NOT NULL DEFAULT 1;

-- Holds are coordination: they live in ZooKeeper (`/control/hold/{id}`), where the
-- planner watches them and an operator sees them, not in the catalog.
ALTER TABLE episodes DROP COLUMN held;
ALTER TABLE clips DROP COLUMN held;

-- What an alias stands for (the normalized media URL, or the feed URL and GUID), for
-- people and `fsck`; `key` is its hash name (`url-...`, `guid-...`).
ALTER TABLE aliases ADD COLUMN key_text TEXT NOT NULL DEFAULT '';

-- Episode and clip numbers: the last one handed out. Bumped in the transaction that
-- creates the records; never lowered, so a deleted record's number is never reused.
INSERT INTO counters (name, value) VALUES ('episodes', 0);
INSERT INTO counters (name, value) VALUES ('clips', 0);

-- Listings after a watermark go in (seq, id) order.
DROP INDEX episodes_by_seq;
CREATE INDEX episodes_by_seq ON episodes (seq, id);
DROP INDEX clips_by_seq;
CREATE INDEX clips_by_seq ON clips (seq, id);
