-- Agent specs stored once. A task's resolved agent spec (a couple of KB, mostly its
-- prompt) used to be in its encoded request, so every row version of the task and its
-- outbox row carried it. Each distinct spec is now a row here, keyed by the SHA-256 of
-- its encoding, written with the first task submitted with it; a request names it by
-- `agent_spec_digest` (in its encoding and in the column below, to join it back).
-- Specs never change under their digest and are not deleted: a reload of the agents
-- adds rows only for the agents it changed. Rows written before this migration keep
-- their spec inline, and `agent_spec_digest` is NULL for them.
CREATE TABLE agent_specs (
    digest     bytea       PRIMARY KEY,
    spec       bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE tasks ADD COLUMN agent_spec_digest bytea;
