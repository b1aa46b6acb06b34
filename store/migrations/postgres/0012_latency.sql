-- Each connection's round trips: see ../sqlite/0016_latency.sql, in PostgreSQL's types.
ALTER TABLE connections ADD COLUMN IF NOT EXISTS latency TEXT;
