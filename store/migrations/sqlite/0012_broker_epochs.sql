-- The epochs of the broker's pools kept in Redis (`broker --store redis://`). Redis may lose a
-- pool's state (a restart without persistence); each loss starts a new epoch, taken here, where
-- it survives, so that fences (epoch in their high bits) never go backwards. `epoch` is NULL
-- until a pool's state is first written.
CREATE TABLE IF NOT EXISTS broker_epochs (
    pool TEXT PRIMARY KEY,
    epoch INTEGER,
    -- When the epoch was taken (the database's clock, ms): the instance that took it writes it
    -- into Redis within moments, so a younger epoch whose state is missing is still being
    -- started, not lost.
    reserved_ms INTEGER
);
