-- A unit's country (ISO 3166-1 alpha-2, upper case; '' when unknown): a lease may ask for one
-- (`"country": "DE"`). The index lets such an acquire walk only that country's units,
-- least recently touched first, as `broker_units_free` does for the whole pool. Every grant
-- and release moves a unit's `free_at`, so each index on it costs every lease cycle: this one
-- holds only the units that have a country, and a pool without countries pays nothing for it.
ALTER TABLE broker_units ADD COLUMN IF NOT EXISTS country TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS broker_units_country ON broker_units (country, free_at) WHERE rank > 0 AND country <> '';

-- The country its last egress check placed a lease's address in (NULL: unknown), so that a
-- task's next check can tell it left the country.
ALTER TABLE broker_leases ADD COLUMN IF NOT EXISTS egress_country TEXT;
