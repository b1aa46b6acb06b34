-- Which history of this database the broker last granted on (see the store's `lineage`
-- module): a PostgreSQL server's timeline (a failover or a point-in-time restore starts a new
-- one), its start when commits are not flushed; this host's boot for a SQLite file, whose last
-- commits a power loss may take. When the live one differs, the database may be older than
-- what it acknowledged: the broker moves every fence past any it can have issued and grants
-- nothing until `hold_until_ms` (the database's clock), when every lease it may have lost has
-- run out. One row.
CREATE TABLE IF NOT EXISTS broker_lineage (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    lineage TEXT NOT NULL,
    hold_until_ms INTEGER NOT NULL
);
