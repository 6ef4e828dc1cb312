-- Archivist's database: the catalog and the research archive (docs/architecture.md,
-- "ZooKeeper and the database"). One file for SQLite and PostgreSQL, so only their
-- common subset: TEXT, BIGINT, DOUBLE PRECISION, INTEGER 0/1 for booleans, times as
-- BIGINT unix milliseconds, ON CONFLICT upserts.
--
-- `seq` columns: every transaction that changes the catalog (or the research archive)
-- takes the next value of its counter row below and stamps the rows it writes with it.
-- The counter row is locked until the transaction commits, so seqs are handed out in
-- commit order and a reader's watermark (`WHERE seq > $last`) never skips a row that
-- commits late.

CREATE TABLE counters (
    name TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('catalog', 0);
INSERT INTO counters (name, value) VALUES ('research', 0);

-- The catalog (was /catalog/episodes, /catalog/clips, /catalog/aliases).
CREATE TABLE episodes (
    id TEXT PRIMARY KEY,
    air_date TEXT,
    title TEXT NOT NULL,
    description TEXT,
    media_url TEXT NOT NULL,
    media_type TEXT,
    curator TEXT NOT NULL,
    priority BIGINT NOT NULL,
    initial_curated BIGINT NOT NULL,
    last_curated BIGINT NOT NULL,
    content_hash TEXT,
    duration_s DOUBLE PRECISION,
    guid TEXT,
    held INTEGER NOT NULL DEFAULT 0,
    seq BIGINT NOT NULL
);
-- The planner loads the catalog by priority.
CREATE INDEX episodes_by_priority ON episodes (priority DESC, id);
CREATE INDEX episodes_by_seq ON episodes (seq);

CREATE TABLE clips (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    description TEXT,
    media_url TEXT NOT NULL,
    media_type TEXT,
    curator TEXT NOT NULL,
    priority BIGINT NOT NULL,
    initial_curated BIGINT NOT NULL,
    last_curated BIGINT NOT NULL,
    content_hash TEXT,
    duration_s DOUBLE PRECISION,
    guid TEXT,
    held INTEGER NOT NULL DEFAULT 0,
    seq BIGINT NOT NULL
);
CREATE INDEX clips_by_priority ON clips (priority DESC, id);
CREATE INDEX clips_by_seq ON clips (seq);

-- A normalized URL or GUID -> the episode or clip it names.
CREATE TABLE aliases (
    key TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    id TEXT NOT NULL,
    seq BIGINT NOT NULL
);
CREATE INDEX aliases_by_target ON aliases (target, id);
CREATE INDEX aliases_by_seq ON aliases (seq);

-- The research archive (was /research/{episode}), in the record's shape: no row per
-- researched pair (100k episodes x 2,000 clips would be 200M rows), but per episode its
-- runs with their clip numbers as ranges, occurrences only of the clips found, and
-- per-clip errors.
CREATE TABLE research (
    episode TEXT PRIMARY KEY,
    duration_s DOUBLE PRECISION,
    seq BIGINT NOT NULL
);
CREATE INDEX research_by_seq ON research (seq);

-- One researcher's contribution (a job) to an episode; `clips` is a ClipSet ("1-40,52").
CREATE TABLE research_runs (
    episode TEXT NOT NULL,
    job TEXT NOT NULL,
    researcher TEXT NOT NULL,
    at BIGINT NOT NULL,
    clips TEXT NOT NULL,
    PRIMARY KEY (episode, job)
);

-- Occurrences of a clip found in an episode (znode_schema::occurrences' compact list).
CREATE TABLE found (
    episode TEXT NOT NULL,
    clip TEXT NOT NULL,
    occurrences TEXT NOT NULL,
    PRIMARY KEY (episode, clip)
);
-- `archivist results --clip`.
CREATE INDEX found_by_clip ON found (clip, episode);

-- A pair whose research ended in a per-clip error, with the clip stamp it was made with.
CREATE TABLE clip_errors (
    episode TEXT NOT NULL,
    clip TEXT NOT NULL,
    message TEXT NOT NULL,
    stamp TEXT,
    PRIMARY KEY (episode, clip)
);
