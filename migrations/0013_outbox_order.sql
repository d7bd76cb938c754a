-- The relay publishes waiting dispatches in priority order, the tenants of a priority
-- taking turns. Each outbox row carries its task's priority and tenant, and its turn:
-- one more than its tenant's last row waiting at that priority, or, when the tenant
-- has none waiting, the earliest turn waiting (so a tenant that arrives takes turns
-- with those already waiting, neither ahead of them all nor behind them all).
ALTER TABLE outbox
    ADD COLUMN priority smallint NOT NULL DEFAULT 3,
    ADD COLUMN tenant   text     NOT NULL DEFAULT '',
    ADD COLUMN turn     bigint   NOT NULL DEFAULT 0;
CREATE INDEX outbox_dispatch_order ON outbox (priority, turn, id);
CREATE INDEX outbox_tenant_turns ON outbox (priority, tenant, turn);
