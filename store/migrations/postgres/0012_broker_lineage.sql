-- The same as ../sqlite/0016_broker_lineage.sql.
CREATE TABLE IF NOT EXISTS broker_lineage (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    lineage TEXT NOT NULL,
    hold_until_ms BIGINT NOT NULL
);
