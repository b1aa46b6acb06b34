-- A unit's round-trip gap: see ../sqlite/0018_broker_gap.sql.
ALTER TABLE broker_units ADD COLUMN IF NOT EXISTS gap_ms BIGINT;
