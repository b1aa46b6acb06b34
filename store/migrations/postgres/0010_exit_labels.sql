-- Labels one row per exit: see ../sqlite/0015_exit_labels.sql, in PostgreSQL's types.
ALTER TABLE label_snapshots ADD COLUMN IF NOT EXISTS exits BIGINT;
ALTER TABLE label_snapshots ADD COLUMN IF NOT EXISTS published BOOLEAN NOT NULL DEFAULT TRUE;

CREATE TABLE IF NOT EXISTS exit_labels (
    snapshot_id   BIGINT NOT NULL,
    position      BIGINT NOT NULL,
    name          TEXT NOT NULL,
    label         TEXT NOT NULL,
    PRIMARY KEY (snapshot_id, position)
);
CREATE UNIQUE INDEX IF NOT EXISTS exit_labels_name ON exit_labels (snapshot_id, name);
