/**
 * Sundial for TypeScript: what a target needs to trust a call from Sundial.
 *
 * `verifySignature` checks the `Sundial-Signature` header (HTTP) or metadata (gRPC)
 * exactly as proto/sundial/v1/target.proto specifies it:
 * `t=<unix seconds>,v1=<hex>[,...],v2=<kid>:<hex>[,...]`, one v1 and one v2 per valid
 * signing secret of the tenant (two during a rotation).
 *
 * - v2: lowercase hex of HMAC-SHA256 keyed with the secret (UTF-8) over
 *   `"sundial-v2\n<purpose>\n<destination>\n<kid>\n<t>\n<idempotency key>\n<attempt>\n"`
 *   followed by the raw body; `purpose` is `run`, `notification` or `test`,
 *   `destination` the URL (gRPC: address) the job or channel names, `kid` the
 *   {@link keyId} of the secret. A call replayed to another target, or a notification
 *   posted to a job's target, does not verify.
 * - v1 (the first format, kept during the transition): the same MAC over
 *   `"<t>.<idempotency key>.<attempt>."` and the body; it binds neither purpose nor
 *   destination.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

/** How far `t` may be from the target's clock, in seconds (target.proto: 5 minutes). */
export const DEFAULT_TOLERANCE_S = 300;

/** What a signed message can be. */
export type Purpose = "run" | "notification" | "test";

const PURPOSES: readonly string[] = ["run", "notification", "test"];

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
  /**
   * What you expect: `"run"` at a job's target, `"notification"` at a notification
   * channel's. With `destination`, a matching v2 is required.
   */
  purpose?: Purpose;
  /** Your URL (gRPC: address) exactly as the job or channel names it. */
  destination?: string;
  /**
   * Also accept a v1 signature (default: only when no purpose and destination are
   * given). During the transition only: v1 binds neither.
   */
  acceptV1?: boolean;
  /** Unix seconds to judge `t` by (default: the clock). */
  now?: number;
  /** How far `t` may be from `now`, in seconds. */
  toleranceS?: number;
}

/** The key id (`kid`) of a signing secret, as v2 names it. */
export function keyId(secret: string): string {
  return createHash("sha256")
    .update("sundial-key-id\n", "utf8")
    .update(secret, "utf8")
    .digest("hex")
    .slice(0, 16);
}

/**
 * The `whsec_...` secret a Standard Webhooks verifier at `destination` needs: HMAC-SHA256
 * of the tenant's signing secret over `"sundial-standard-webhooks\n<purpose>\n<destination>"`,
 * base64. Each endpoint and purpose has its own key.
 */
export function standardWebhookSecret(
  secret: string,
  options: { purpose: Purpose; destination: string },
): string {
  if (!PURPOSES.includes(options.purpose)) {
    throw new TypeError(`purpose must be one of ${PURPOSES.join(", ")}`);
  }
  const derived = createHmac("sha256", Buffer.from(secret, "utf8"))
    .update(`sundial-standard-webhooks\n${options.purpose}\n${options.destination}`, "utf8")
    .digest("base64");
  return `whsec_${derived}`;
}

function sameHex(given: string, expected: Buffer): boolean {
  const bytes = /^[0-9a-f]{64}$/.test(given) ? Buffer.from(given, "hex") : Buffer.alloc(32);
  return timingSafeEqual(bytes, expected);
}

/**
 * Throws {@link SignatureError} unless `call` carries a signature by one of `secrets`
 * made within the tolerance of now (and, given `purpose` and `destination`, a v2 for
 * them). Compares in constant time.
 */
export function verifySignature(call: SignedCall, options: VerifyOptions): void {
  if ((options.purpose === undefined) !== (options.destination === undefined)) {
    throw new TypeError("pass purpose and destination together");
  }
  const bound = options.purpose !== undefined;
  if (bound && !PURPOSES.includes(options.purpose as string)) {
    throw new TypeError(`purpose must be one of ${PURPOSES.join(", ")}`);
  }
  const v1Allowed = options.acceptV1 ?? !bound;
  let timestamp = "";
  const v1: string[] = [];
  const v2: Array<[string, string]> = [];
  for (const part of call.header.split(",")) {
    const at = part.indexOf("=");
    if (at < 0) {
      throw new SignatureError("malformed Sundial-Signature: expected t=...,v1=...");
    }
    const name = part.slice(0, at).trim();
    const value = part.slice(at + 1).trim();
    if (name === "t") timestamp = value;
    else if (name === "v1") v1.push(value);
    else if (name === "v2") {
      const colon = value.indexOf(":");
      v2.push(colon < 0 ? [value, ""] : [value.slice(0, colon), value.slice(colon + 1)]);
    }
  }
  if (!/^\d+$/.test(timestamp) || v1.length + v2.length === 0) {
    throw new SignatureError(
      "malformed Sundial-Signature: needs t=<unix seconds> and a v1 or v2",
    );
  }
  const now = options.now ?? Date.now() / 1000;
  if (Math.abs(now - Number(timestamp)) > (options.toleranceS ?? DEFAULT_TOLERANCE_S)) {
    throw new SignatureError(`Sundial-Signature t=${timestamp} is outside the tolerance`);
  }
  const body = typeof call.body === "string" ? Buffer.from(call.body, "utf8") : call.body;
  let matched = false;
  if (bound) {
    const byKid = new Map(options.secrets.map((s) => [keyId(s), s]));
    for (const [kid, mac] of v2) {
      const secret = byKid.get(kid);
      if (secret === undefined) continue;
      const expected = createHmac("sha256", Buffer.from(secret, "utf8"))
        .update(
          `sundial-v2\n${options.purpose}\n${options.destination}\n${kid}\n${timestamp}\n` +
            `${call.idempotencyKey}\n${call.attempt}\n`,
          "utf8",
        )
        .update(body)
        .digest();
      matched = sameHex(mac, expected) || matched;
    }
  }
  if (v1Allowed) {
    const prefix = Buffer.from(`${timestamp}.${call.idempotencyKey}.${call.attempt}.`, "utf8");
    for (const secret of options.secrets) {
      const expected = createHmac("sha256", Buffer.from(secret, "utf8"))
        .update(prefix)
        .update(body)
        .digest();
      for (const mac of v1) {
        // Every pair compared, so the time taken does not tell which one matched.
        matched = sameHex(mac, expected) || matched;
      }
    }
  }
  if (!matched) {
    if (bound && !v1Allowed && v2.length === 0) {
      throw new SignatureError(
        "Sundial-Signature has no v2 (pass acceptV1: true to accept v1 during the transition)",
      );
    }
    throw new SignatureError(
      bound
        ? "Sundial-Signature matches none of the secrets for this purpose and destination"
        : "Sundial-Signature matches none of the secrets",
    );
  }
}
