-- Leases that let several auditors share one database: see ../sqlite/0007_leases.sql.
CREATE TABLE IF NOT EXISTS leases (
    lease_key        TEXT   PRIMARY KEY NOT NULL,
    holder           TEXT   NOT NULL,
    expires_unix_ms  BIGINT NOT NULL,
    done_unix_ms     BIGINT
);
CREATE INDEX IF NOT EXISTS leases_holder ON leases (holder);
