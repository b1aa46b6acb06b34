-- The same as ../sqlite/0012_broker_epochs.sql.
CREATE TABLE IF NOT EXISTS broker_epochs (
    pool TEXT PRIMARY KEY,
    epoch BIGINT,
    -- When the epoch was taken (the database's clock, ms): the instance that took it writes it
    -- into Redis within moments, so a younger epoch whose state is missing is still being
    -- started, not lost.
    reserved_ms BIGINT
);
