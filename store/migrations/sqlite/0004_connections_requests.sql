-- Observations split in two (DESIGN.md, "observation"): a connection is analysed and stored once,
-- with its raw bytes; each request on it is a small row of its own. The rows of the old
-- `observations` table are moved here by the store when it opens (store/legacy.rs), then that
-- table is dropped.
CREATE TABLE IF NOT EXISTS connections (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conn_id         TEXT    NOT NULL UNIQUE,
    time_unix_ms    INTEGER NOT NULL,           -- accepted
    peer_ip         TEXT    NOT NULL,           -- as --store-peer-ip allows
    peer_port       INTEGER NOT NULL,
    sni             TEXT,
    failure         TEXT,                       -- Failure, snake_case
    failure_detail  TEXT,
    requests        INTEGER NOT NULL,
    prefix_truncated INTEGER NOT NULL,
    facts           TEXT    NOT NULL,           -- JSON ConnectionFacts
    hello           BLOB    NOT NULL,           -- ClientHello records as received
    prefix          BLOB    NOT NULL            -- decrypted client bytes, up to the capture cap
);
CREATE INDEX IF NOT EXISTS connections_time ON connections (time_unix_ms);

-- One row per request: only what is the request's own.
CREATE TABLE IF NOT EXISTS requests (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    conn_id         TEXT    NOT NULL,
    request_index   INTEGER NOT NULL,
    time_unix_ms    INTEGER NOT NULL,
    token           TEXT,
    method          TEXT    NOT NULL,
    path            TEXT    NOT NULL,
    stream_id       INTEGER,
    bucket          TEXT,
    pseudo_order    TEXT,                       -- HTTP/2 pseudo-headers, JSON array
    header_order    TEXT,                       -- HTTP/2 header names, JSON array
    http1           TEXT                        -- JSON Http1Echo, HTTP/1.x requests only
);
CREATE INDEX IF NOT EXISTS requests_token ON requests (token, time_unix_ms) WHERE token IS NOT NULL;
CREATE INDEX IF NOT EXISTS requests_time ON requests (time_unix_ms);
CREATE INDEX IF NOT EXISTS requests_conn ON requests (conn_id);
