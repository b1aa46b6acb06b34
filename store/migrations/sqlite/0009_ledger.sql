-- The h3 downgrade ledger (docs/quic.md, "The ledger"): one row per client identity, the
-- client's IP and the TLS voice of its TCP connections, rewritten as it changes. Written only
-- under --store-peer-ip full: the identity is an address.
CREATE TABLE IF NOT EXISTS ledger_identities (
    client_ip        TEXT    NOT NULL,
    tls_voice_id     TEXT    NOT NULL,
    updated_unix_ms  INTEGER NOT NULL,
    entry            TEXT    NOT NULL,          -- JSON: the identity's ledger entry
    PRIMARY KEY (client_ip, tls_voice_id)
);
CREATE INDEX IF NOT EXISTS ledger_identities_updated ON ledger_identities (updated_unix_ms);
