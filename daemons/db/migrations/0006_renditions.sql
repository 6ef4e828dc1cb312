-- Renditions: the exact audio an episode's results are measured on (issue 23; see
-- daemons/db/src/renditions.rs and docs/researcher.md, "Renditions"). A podcast host
-- inserting ads dynamically serves different bytes for the same URL, so an offset is
-- true only of the bytes it was measured in: every complete download of an episode is
-- a rendition, named by the sha256 of its bytes (the media store's key).
CREATE TABLE renditions (
    episode TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    duration_s DOUBLE PRECISION,
    -- When it was first fetched and last seen again (unix ms).
    fetched_at BIGINT NOT NULL,
    last_seen BIGINT NOT NULL,
    -- Complete downloads that found these bytes.
    seen BIGINT NOT NULL,
    -- The catalog's media URL it was fetched from (the latest fetch's: a pin is used only
    -- for jobs of that URL, so an episode re-curated to other media is fetched again),
    -- the URL after redirects, and the validators the server sent (for a conditional GET).
    url TEXT NOT NULL,
    final_url TEXT NOT NULL,
    etag TEXT,
    last_modified TEXT,
    PRIMARY KEY (episode, sha256)
);

-- The pinned rendition of an episode: the first whose download was complete and
-- decoded. Later jobs research these bytes (from the media store). It moves only when
-- they can no longer be had (not in the store, and the server serves others).
CREATE TABLE rendition_pins (
    episode TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL,
    pinned_at BIGINT NOT NULL,
    -- How many times it moved (0: still the first download's).
    moves BIGINT NOT NULL DEFAULT 0
);

-- Which rendition each research run (research_runs, keyed the same) was measured on.
-- A run stored before this migration has no row: its rendition is unknown.
CREATE TABLE run_renditions (
    episode TEXT NOT NULL,
    job TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    at BIGINT NOT NULL,
    PRIMARY KEY (episode, job)
);
