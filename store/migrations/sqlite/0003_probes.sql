-- Auditor probes and label snapshots. Exit URLs are stored redacted; no credential is stored.
CREATE TABLE IF NOT EXISTS probes (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL,
    exit_name     TEXT,              -- NULL for the direct baseline
    token         TEXT NOT NULL,
    persona       TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    error_class   TEXT,              -- NULL when the probe succeeded
    tls_voice     TEXT,
    http_voice    TEXT,
    bucket        TEXT,
    record        TEXT NOT NULL      -- the full ProbeRecord JSON
);
CREATE INDEX IF NOT EXISTS probes_exit_id ON probes (exit_name, id);

CREATE TABLE IF NOT EXISTS label_snapshots (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    generated_at  TEXT NOT NULL,
    doc           TEXT NOT NULL      -- the LabelsDoc JSON
);
