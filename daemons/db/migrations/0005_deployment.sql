-- The deployment this database belongs to (outside 22 finding 8): the id `archivist init`
-- made and keeps in the tree's /meta. At most one row; a daemon whose tree names another
-- id (or whose tree is bound while this table is empty) is refused.
CREATE TABLE deployment (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    id TEXT NOT NULL
);
