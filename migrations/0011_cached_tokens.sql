-- The parts of each task's own input tokens read from and written to the provider's
-- prompt cache (see 0006_usage.sql): a subtree's are a sum over its rows too.
ALTER TABLE tasks
    ADD COLUMN own_cached_input_tokens      bigint NOT NULL DEFAULT 0,
    ADD COLUMN own_cache_write_input_tokens bigint NOT NULL DEFAULT 0;
