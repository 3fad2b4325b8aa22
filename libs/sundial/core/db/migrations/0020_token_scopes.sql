-- Scoped tenant tokens (issue 27 item 5, docs/design.md section 7 "Scopes"): what a
-- TENANT token may do on top of its role. NULL: every scope, the meaning of every token
-- issued before this migration (so none of them loses a right it had).
ALTER TABLE api_tokens
    ADD COLUMN scopes text[],
    ADD CONSTRAINT api_tokens_scopes_check
        CHECK (scopes IS NULL OR (role = 'tenant' AND scopes <@ ARRAY['read', 'write', 'manage']));
