-- Leases that let several auditors share one database (README, "Running a fleet"): a key (an
-- exit of a persona, or a persona's labels snapshot) is held by one auditor until its lease
-- expires; `done_unix_ms` says when it was last finished, so a period's work is done once.
CREATE TABLE IF NOT EXISTS leases (
    lease_key        TEXT    PRIMARY KEY NOT NULL,
    holder           TEXT    NOT NULL,
    expires_unix_ms  INTEGER NOT NULL,
    done_unix_ms     INTEGER
);
CREATE INDEX IF NOT EXISTS leases_holder ON leases (holder);
