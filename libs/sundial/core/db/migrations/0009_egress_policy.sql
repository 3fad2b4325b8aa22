-- Per-tenant egress policy (docs/design.md section 7, sundial.core.egress).
--
-- NULL: the tenant has no policy of its own and the operator's default applies
-- (SUNDIAL_ALLOW_PRIVATE_TARGETS, SUNDIAL_ALLOW_LOOPBACK_TARGETS). Otherwise the
-- canonical JSON document {"rules": [{"host"|"cidr": ..., "protocols": [...]}]} that
-- the API writes and the ledger hands to executors with each grant.
ALTER TABLE tenants
    ADD COLUMN egress_policy jsonb,
    ADD COLUMN egress_policy_updated_at timestamptz;
