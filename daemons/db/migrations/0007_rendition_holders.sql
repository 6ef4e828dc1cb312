-- Affinity (issue 23; docs/researcher.md, "Affinity"): the researcher whose own local
-- media store holds an episode's pinned rendition, so the planner can hint that jobs of
-- the episode go there (anywhere else the episode is downloaded again). Written by the
-- researcher that kept or read the pin in its local store; NULL when unknown (a pin from
-- before this migration, or researchers sharing an S3 store, where every one holds it).
ALTER TABLE rendition_pins ADD COLUMN holder TEXT;
ALTER TABLE rendition_pins ADD COLUMN held_at BIGINT;
