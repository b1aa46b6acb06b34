-- QUIC observations (docs/quic.md): one row per QUIC connection, written with its first
-- HTTP/3 request, and one row per HTTP/3 request. Apart from `connections`/`requests`, which
-- stay TCP's: nothing of an older database changes.
CREATE TABLE IF NOT EXISTS quic_connections (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conn_id         TEXT    NOT NULL UNIQUE,
    time_unix_ms    INTEGER NOT NULL,           -- first request answered
    peer_ip         TEXT    NOT NULL,           -- as --store-peer-ip allows
    peer_port       INTEGER NOT NULL,
    sni             TEXT,
    ja4             TEXT,
    tls_voice_id    TEXT,
    quic_voice_id   TEXT,                       -- NULL when the capture missed the Initials
    http3_voice_id  TEXT,                       -- NULL without the client's SETTINGS
    h3_text         TEXT,
    quic            TEXT,                       -- JSON: the echo's `quic` object
    http3           TEXT,                       -- JSON: the echo's `http3` object
    hello           BLOB    NOT NULL            -- the reassembled ClientHello (empty if none)
);
CREATE INDEX IF NOT EXISTS quic_connections_time ON quic_connections (time_unix_ms);

CREATE TABLE IF NOT EXISTS quic_requests (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conn_id         TEXT    NOT NULL,
    request_index   INTEGER NOT NULL,
    time_unix_ms    INTEGER NOT NULL,
    token           TEXT,
    method          TEXT    NOT NULL,
    path            TEXT    NOT NULL,
    stream_id       INTEGER NOT NULL,
    pseudo_order    TEXT    NOT NULL,           -- JSON array, wire order
    header_order    TEXT    NOT NULL            -- JSON array, wire order
);
CREATE INDEX IF NOT EXISTS quic_requests_token ON quic_requests (token, time_unix_ms) WHERE token IS NOT NULL;
CREATE INDEX IF NOT EXISTS quic_requests_time ON quic_requests (time_unix_ms);
CREATE INDEX IF NOT EXISTS quic_requests_conn ON quic_requests (conn_id);
