-- Faster compression of the large values written with every task. A task row holds its
-- encoded request (with the resolved agent spec, a couple of KB) and, once finished,
-- its result: past about 2 KB Postgres compresses the row's large values, and every
-- status change writes a whole new row version, so they are compressed again each
-- time. lz4 does it at a fraction of the CPU of the default pglz; the outbox copy of
-- the request and a session's transcript are of the same kind. Only values written
-- from now on use it; older ones stay readable. A server built without lz4 keeps pglz.
DO $$
BEGIN
    ALTER TABLE tasks ALTER COLUMN request SET COMPRESSION lz4,
                      ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE outbox ALTER COLUMN payload SET COMPRESSION lz4;
    ALTER TABLE sessions ALTER COLUMN transcript SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available on this server; large values stay compressed with pglz';
END
$$;
