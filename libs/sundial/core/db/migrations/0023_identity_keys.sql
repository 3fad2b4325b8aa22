-- Sundial's identity-token signing keys (issue 27 item 4, docs/design.md section 7
-- "Identity tokens"): Ed25519 key pairs that sign the per-call JWTs the ledger mints, and
-- whose public halves the API publishes as JWKS at /.well-known/jwks.json.
--
-- The private key is sealed as tenant secrets are (envelope encryption under the
-- operator's key-encryption key `kek_id`, associated data "identity/<kid>"); the public
-- JWK is stored in the clear. The newest key not retired signs; a key is published from
-- its creation until `retire_at` (set by a rotation to now + the overlap), so tokens it
-- signed stay verifiable until they expire.
CREATE TABLE identity_keys (
    kid         text        COLLATE "C" PRIMARY KEY,
    algorithm   text        NOT NULL,
    public_jwk  jsonb       NOT NULL,
    kek_id      text        NOT NULL,
    wrapped_key bytea       NOT NULL,
    nonce       bytea       NOT NULL,
    ciphertext  bytea       NOT NULL,
    created_at  timestamptz NOT NULL,
    retire_at   timestamptz
);

CREATE INDEX identity_keys_created_idx ON identity_keys (created_at DESC);
