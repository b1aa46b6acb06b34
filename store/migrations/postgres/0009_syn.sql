-- Each connection's SYN headers: see ../sqlite/0014_syn.sql, in PostgreSQL's types.
ALTER TABLE connections ADD COLUMN IF NOT EXISTS syn BYTEA;
