-- The h3 downgrade ledger: see ../sqlite/0009_ledger.sql, in PostgreSQL's types.
CREATE TABLE IF NOT EXISTS ledger_identities (
    client_ip        TEXT   NOT NULL,
    tls_voice_id     TEXT   NOT NULL,
    updated_unix_ms  BIGINT NOT NULL,
    entry            TEXT   NOT NULL,
    PRIMARY KEY (client_ip, tls_voice_id)
);
CREATE INDEX IF NOT EXISTS ledger_identities_updated ON ledger_identities (updated_unix_ms);
