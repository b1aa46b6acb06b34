-- The same as ../sqlite/0011_broker_retention.sql.
-- Ended leases are pruned after the broker's `--retain`: an index on when each lease ended (or,
-- if it never was ended, expired) finds them without reading the table. Most leases have no task
-- and no egress check: those two indexes only hold the rows that do.
CREATE INDEX IF NOT EXISTS broker_leases_end ON broker_leases (COALESCE(ended_ms, expires_ms));
DROP INDEX IF EXISTS broker_leases_task;
CREATE INDEX IF NOT EXISTS broker_leases_task ON broker_leases (task, state, expires_ms)
    WHERE task IS NOT NULL;
DROP INDEX IF EXISTS broker_leases_egress;
CREATE INDEX IF NOT EXISTS broker_leases_egress ON broker_leases (egress, state)
    WHERE egress IS NOT NULL;
