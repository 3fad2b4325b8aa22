-- Bearer tokens (api_tokens): the lookups every authenticated gRPC service makes.

-- name: find_token
-- Authentication: the token with this sha256 ($1), and whether it is usable at $2.
SELECT token_id, tenant_id, role, last_used_at, scopes,
       (revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)) AS usable
  FROM api_tokens
 WHERE token_hash = $1;

-- name: touch_token
-- Records a use of token $1 at $2, at most once a minute.
UPDATE api_tokens
   SET last_used_at = $2
 WHERE token_id = $1
   AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute');
