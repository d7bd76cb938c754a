-- What each task's own model calls spent (every recorded attempt added up, its
-- descendants excluded), so that a subtree's usage is a sum over its rows; and the
-- budget in effect for the task's subtree (null: no limit). Cost in pico-dollars.
ALTER TABLE tasks
    ADD COLUMN own_input_tokens    bigint NOT NULL DEFAULT 0,
    ADD COLUMN own_output_tokens   bigint NOT NULL DEFAULT 0,
    ADD COLUMN own_cost_picousd    bigint NOT NULL DEFAULT 0,
    ADD COLUMN own_unpriced_tokens bigint NOT NULL DEFAULT 0,
    ADD COLUMN max_tokens          bigint,
    ADD COLUMN max_cost_picousd    bigint;
-- Subtree sums walk down through tasks_parent (0001); the walk up to a tree's
-- budgeted top follows the primary key.
