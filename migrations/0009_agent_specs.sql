-- Agent specs stored once. A task's resolved agent spec (a couple of KB, mostly its
-- prompt) and the list of agents its `task` tool may start (their descriptions) used
-- to be in its encoded request, so every row version of the task and its outbox row
-- carried them. Each distinct bundle of the two (an encoded `AgentSpecBundle`) is now
-- a row here, keyed by the SHA-256 of its encoding, written with the first task
-- submitted with it; a request names it by `agent_spec_digest` (in its encoding, and in
-- the column below to join it back). Bundles never change under their digest and are
-- not deleted: a reload of the agents adds rows only for what it changed. Rows written
-- before this migration keep their spec inline, and `agent_spec_digest` is NULL.
CREATE TABLE agent_specs (
    digest     bytea       PRIMARY KEY,
    bundle     bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE tasks ADD COLUMN agent_spec_digest bytea;
