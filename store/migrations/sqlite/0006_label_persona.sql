-- The persona of a labels snapshot as a column of its own (it was read out of the JSON with
-- SQLite's json_extract, which PostgreSQL does not have); snapshots stored before get theirs
-- from their document. Probes are looked up by token (`exitvoice diff`).
ALTER TABLE label_snapshots ADD COLUMN persona TEXT;
UPDATE label_snapshots SET persona = json_extract(doc, '$.persona');
CREATE INDEX IF NOT EXISTS label_snapshots_persona ON label_snapshots (persona, id);
CREATE INDEX IF NOT EXISTS probes_token ON probes (token);
