-- A unit's round-trip gap: the smallest gap its label saw (`latency.round_trip.gap_min_us`),
-- in whole ms rounded up; NULL when never measured. A lease may ask for `max_gap_ms`: only a
-- unit whose gap is known and at most that serves it, so a NULL meets no limit. No index: such
-- an acquire walks `broker_units_free` as any other and skips the units over its limit, and an
-- index on `free_at` would cost every lease cycle of every unit.
ALTER TABLE broker_units ADD COLUMN gap_ms BIGINT;
