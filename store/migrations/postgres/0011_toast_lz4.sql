-- The large values (a probe's record, ~11 KB of the echo's JSON answer; a connection's facts and
-- raw bytes; labels) are compressed with lz4 rather than PostgreSQL's default pglz when they
-- are stored out of line (TOAST, values over ~2 KB). pglz costs the server about as much CPU as
-- the rest of a probe's write: at 10,000 exits × 4 samples the server used 29-31 s of CPU with
-- pglz and 16-17 s with lz4 (docs/benchmarks.md). Only new values are compressed this way;
-- stored ones stay as they are and read as before. A server built without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE probes ALTER COLUMN record SET COMPRESSION lz4;
    ALTER TABLE connections ALTER COLUMN facts SET COMPRESSION lz4;
    ALTER TABLE connections ALTER COLUMN hello SET COMPRESSION lz4;
    ALTER TABLE connections ALTER COLUMN prefix SET COMPRESSION lz4;
    ALTER TABLE label_snapshots ALTER COLUMN doc SET COMPRESSION lz4;
    ALTER TABLE exit_labels ALTER COLUMN label SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not available on this server: large values keep pglz';
END
$$;
