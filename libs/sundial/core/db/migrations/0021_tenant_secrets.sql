-- Tenant secrets (issue 27 item 1, docs/design.md section 7 "Secrets"): write-only
-- credentials that target headers and metadata reference as ${secret:<name>}.
--
-- Envelope encryption: `ciphertext` is the value under AES-256-GCM with a data key of
-- its own (`nonce`, associated data "<tenant_id>/<name>"); `wrapped_key` is that data
-- key under the operator's key-encryption key `kek_id` (AES-256-GCM again, its nonce
-- prefixed, associated data "<kek_id>/<tenant_id>/<name>"). An update seals the new
-- value under a new data key. Nothing here decrypts
-- without the operator's key, which is never in the database. Rotating the
-- key-encryption key rewrites `wrapped_key` and `kek_id` only (the partial index finds
-- what is left to re-wrap).
CREATE TABLE tenant_secrets (
    tenant_id   text        NOT NULL REFERENCES tenants (tenant_id) ON DELETE CASCADE,
    name        text        COLLATE "C" NOT NULL,
    description text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1,
    kek_id      text        NOT NULL,
    wrapped_key bytea       NOT NULL,
    nonce       bytea       NOT NULL,
    ciphertext  bytea       NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name)
);

CREATE INDEX tenant_secrets_kek_idx ON tenant_secrets (kek_id);
