-- Schema bookkeeping; the observation and probe tables come in their own migrations.
CREATE TABLE IF NOT EXISTS exitvoice_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
INSERT OR IGNORE INTO exitvoice_meta (key, value) VALUES ('created_by', 'exitvoice');
