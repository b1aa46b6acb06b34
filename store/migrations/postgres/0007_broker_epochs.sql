-- The same as ../sqlite/0012_broker_epochs.sql.
CREATE TABLE IF NOT EXISTS broker_epochs (
    pool TEXT PRIMARY KEY,
    epoch BIGINT
);
