-- The lease broker's state: see ../sqlite/0010_broker.sql (the same tables, BIGINT times).

-- One row per lease unit: a plain exit, or one session slot of a gateway (`gw#2`). `rank` is
-- what the unit's newest label admits (0 nothing, 1 stateless, 2 anonymous, 3 identity);
-- `life_ms` the longest life of a lease on it (below a gateway's sticky window). The
-- `*_until` and `shared_count` columns let an acquire find a candidate through an index; the
-- unit's live `broker_leases` rows, read under its lock, decide.
CREATE TABLE IF NOT EXISTS broker_units (
    unit             TEXT    PRIMARY KEY NOT NULL,
    exit_name        TEXT    NOT NULL,
    rank             BIGINT NOT NULL,
    capacity         BIGINT NOT NULL,
    life_ms          BIGINT NOT NULL,
    exclusive_until  BIGINT NOT NULL DEFAULT 0,
    shared_until     BIGINT NOT NULL DEFAULT 0,
    shared_count     BIGINT NOT NULL DEFAULT 0,
    gateway          BIGINT NOT NULL DEFAULT 0,
    free_at          BIGINT NOT NULL DEFAULT 0
);
-- An acquire walks the units that admit something, least recently touched first (every grant
-- and release sets `free_at` to now, so the held ones gather at the far end), and stops at its
-- first free few: no scan of the pool, however large.
CREATE INDEX IF NOT EXISTS broker_units_free ON broker_units (free_at) WHERE rank > 0;

-- Per exit (a gateway's slots share their gateway's row): the fence, which only grows, and
-- the streak of `timeout`/`error` outcomes since its last success.
CREATE TABLE IF NOT EXISTS broker_exits (
    exit_name     TEXT    PRIMARY KEY NOT NULL,
    fence         BIGINT NOT NULL,
    error_streak  BIGINT NOT NULL DEFAULT 0
);

-- Every lease granted. `state`: live, released, revoked. Times are the store's clock, ms.
-- `egress`: the address its last egress check saw.
CREATE TABLE IF NOT EXISTS broker_leases (
    lease_id      TEXT    PRIMARY KEY NOT NULL,
    unit          TEXT    NOT NULL,
    exit_name     TEXT    NOT NULL,
    class         TEXT    NOT NULL,
    holder        TEXT    NOT NULL,
    task          TEXT,
    origin        TEXT,
    fence         BIGINT NOT NULL,
    session       TEXT,
    granted_ms    BIGINT NOT NULL,
    expires_ms    BIGINT NOT NULL,
    life_ends_ms  BIGINT NOT NULL,
    state         TEXT    NOT NULL,
    outcome       TEXT,
    latency_ms    BIGINT,
    ended_ms      BIGINT,
    egress        TEXT
);
CREATE INDEX IF NOT EXISTS broker_leases_unit ON broker_leases (unit, state, expires_ms);
CREATE INDEX IF NOT EXISTS broker_leases_task ON broker_leases (task, state, expires_ms);
CREATE INDEX IF NOT EXISTS broker_leases_egress ON broker_leases (egress, state);

-- Bans of an (exit, origin) pair, or of the whole exit (origin ''), until a time, with the
-- count of bans so far (the back-off's exponent).
CREATE TABLE IF NOT EXISTS broker_bans (
    exit_name  TEXT    NOT NULL,
    origin     TEXT    NOT NULL,
    until_ms   BIGINT NOT NULL,
    strikes    BIGINT NOT NULL,
    PRIMARY KEY (exit_name, origin)
);

-- Gateway session ids never to be issued again.
CREATE TABLE IF NOT EXISTS broker_retired_sessions (
    exit_name  TEXT    NOT NULL,
    session    TEXT    NOT NULL,
    retired_ms BIGINT NOT NULL,
    PRIMARY KEY (exit_name, session)
);
