-- Labels one row per exit, so that a snapshot is written and read an exit at a time: a pool of
-- 100,000 exits is never one document in memory. A snapshot's `doc` then holds everything but
-- its exits ("exits": []) and `exits` counts its rows; on snapshots stored before, `exits` is
-- NULL and `doc` holds them all.
ALTER TABLE label_snapshots ADD COLUMN exits INTEGER;
-- 0 while the snapshot is being written, and for good when another auditor of the period
-- stored the period's snapshot (the run reads its own, then discards it): only published
-- snapshots are anyone's "latest".
ALTER TABLE label_snapshots ADD COLUMN published INTEGER NOT NULL DEFAULT 1;

CREATE TABLE IF NOT EXISTS exit_labels (
    snapshot_id   INTEGER NOT NULL,  -- label_snapshots.id
    position      INTEGER NOT NULL,  -- the exit's place in the exits file, from 0
    name          TEXT NOT NULL,
    label         TEXT NOT NULL,     -- the ExitLabel JSON
    PRIMARY KEY (snapshot_id, position)
);
CREATE UNIQUE INDEX IF NOT EXISTS exit_labels_name ON exit_labels (snapshot_id, name);
