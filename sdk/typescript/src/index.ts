/**
 * Sundial for TypeScript: what a target needs to trust a call from Sundial.
 *
 * `verifySignature` checks the `Sundial-Signature` header (HTTP) or metadata (gRPC)
 * exactly as proto/sundial/v1/target.proto specifies it:
 * `t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, each v1 the lowercase hex of HMAC-SHA256
 * keyed with one of the tenant's signing secrets (UTF-8) over
 * `"<t>.<idempotency key>.<attempt>."` followed by the raw body bytes.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

/** How far `t` may be from the target's clock, in seconds (target.proto: 5 minutes). */
export const DEFAULT_TOLERANCE_S = 300;

/** The call is not a genuine, current call from Sundial; the message says why. */
export class SignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SignatureError";
  }
}

export interface SignedCall {
  /** The `Sundial-Signature` value. */
  header: string;
  /** The `Idempotency-Key` value (the run key). */
  idempotencyKey: string;
  /** The `Sundial-Attempt` value. */
  attempt: string | number;
  /** The raw request body (gRPC: `ExecuteRequest.payload`). */
  body: Uint8Array | string;
}

export interface VerifyOptions {
  /** The tenant's signing secrets you accept (both during a rotation). */
  secrets: readonly string[];
  /** Unix seconds to judge `t` by (default: the clock). */
  now?: number;
  /** How far `t` may be from `now`, in seconds. */
  toleranceS?: number;
}

/**
 * Throws {@link SignatureError} unless `call` carries a signature by one of `secrets`
 * made within the tolerance of now. Compares in constant time.
 */
export function verifySignature(call: SignedCall, options: VerifyOptions): void {
  let timestamp = "";
  const macs: string[] = [];
  for (const part of call.header.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) {
      throw new SignatureError("malformed Sundial-Signature: expected t=...,v1=...");
    }
    const name = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (name === "t") timestamp = value;
    else if (name === "v1") macs.push(value);
  }
  if (!/^\d+$/.test(timestamp) || macs.length === 0) {
    throw new SignatureError("malformed Sundial-Signature: needs t=<unix seconds> and a v1");
  }
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.toleranceS ?? DEFAULT_TOLERANCE_S)) {
    throw new SignatureError(`Sundial-Signature t=${timestamp} is outside the tolerance`);
  }
  const prefix = Buffer.from(`${timestamp}.${call.idempotencyKey}.${call.attempt}.`, "utf8");
  const body = typeof call.body === "string" ? Buffer.from(call.body, "utf8") : call.body;
  let matched = false;
  for (const secret of options.secrets) {
    const expected = createHmac("sha256", Buffer.from(secret, "utf8"))
      .update(prefix)
      .update(body)
      .digest();
    for (const mac of macs) {
      const given = /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, "hex") : Buffer.alloc(32);
      // Every pair compared, so the time taken does not tell which one matched.
      matched = timingSafeEqual(given, expected) || matched;
    }
  }
  if (!matched) {
    throw new SignatureError("Sundial-Signature matches none of the secrets");
  }
}
