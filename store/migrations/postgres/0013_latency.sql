-- Each connection's round trips: see ../sqlite/0017_latency.sql, in PostgreSQL's types.
ALTER TABLE connections ADD COLUMN IF NOT EXISTS latency TEXT;
