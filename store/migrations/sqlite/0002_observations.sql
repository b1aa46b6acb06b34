-- One row per request the echo server answered, and one per connection that carried no request
-- (handshake failures, scanners, clients that said nothing): request_index 0.
-- Raw bytes are kept beside the parsed summary so fingerprints can be recomputed after a fix.
CREATE TABLE IF NOT EXISTS observations (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    conn_id       TEXT    NOT NULL,
    request_index INTEGER NOT NULL,
    time          TEXT    NOT NULL,           -- RFC 3339 UTC
    time_unix_ms  INTEGER NOT NULL,
    peer_ip       TEXT    NOT NULL,
    peer_port     INTEGER NOT NULL,
    token         TEXT,                       -- probe token, when the request carried one
    sni           TEXT,
    failure       TEXT,                       -- why the connection failed, when it did
    summary       TEXT    NOT NULL,           -- JSON: the echo, or the connection summary
    hello         BLOB    NOT NULL,           -- ClientHello records as received
    prefix        BLOB    NOT NULL            -- decrypted client bytes, up to the capture cap
);
CREATE INDEX IF NOT EXISTS observations_token_time ON observations (token, time_unix_ms);
CREATE INDEX IF NOT EXISTS observations_time ON observations (time_unix_ms);
