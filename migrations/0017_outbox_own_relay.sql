-- A coordinator publishes the dispatches of the submits it wrote itself, from memory,
-- right after their commit, and deletes their rows; other coordinators' relays scan
-- the outbox only for rows nobody is publishing. Such a row carries relay_after: the
-- moment from which any relay may take it (its writer died, or its publish failed).
-- A row another path wrote (a replay, a schedule's fire, a delayed start) has none:
-- any relay takes it at once.
ALTER TABLE outbox ADD COLUMN relay_after timestamptz;
