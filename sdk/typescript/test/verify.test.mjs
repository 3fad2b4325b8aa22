// The TypeScript verifier against signatures made by Sundial's own ledger code: the
// Python test that runs this (tests/unit/test_typescript_sdk.py) writes them to the JSON
// file named by SUNDIAL_SIGNATURE_VECTORS.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { SignatureError, verifySignature } from "../dist/index.js";

const path = process.env.SUNDIAL_SIGNATURE_VECTORS;

test("signatures the ledger made verify, and tampering is refused", { skip: !path }, () => {
  const vectors = JSON.parse(readFileSync(path, "utf8"));
  assert.ok(vectors.length >= 3);
  for (const v of vectors) {
    const call = {
      header: v.header,
      idempotencyKey: v.idempotency_key,
      attempt: v.attempt,
      body: Buffer.from(v.body_base64, "base64"),
    };
    const now = v.t + 10;
    verifySignature(call, { secrets: v.secrets, now });
    // Any one of the secrets signing is enough (a rotation's overlap).
    verifySignature(call, { secrets: [v.secrets.at(-1)], now });
    assert.throws(() => verifySignature(call, { secrets: ["wrong"], now }), SignatureError);
    assert.throws(
      () => verifySignature({ ...call, attempt: v.attempt + 1 }, { secrets: v.secrets, now }),
      /matches none/,
    );
    assert.throws(
      () => verifySignature({ ...call, body: Buffer.concat([call.body, Buffer.from("x")]) }, { secrets: v.secrets, now }),
      /matches none/,
    );
    assert.throws(
      () => verifySignature(call, { secrets: v.secrets, now: v.t + 301 }),
      /outside the tolerance/,
    );
  }
});

test("a malformed header is refused with a reason", () => {
  for (const header of ["", "t=abc,v1=00", "v1=00", "t=1"]) {
    assert.throws(
      () => verifySignature({ header, idempotencyKey: "k", attempt: 1, body: "" }, { secrets: ["s"] }),
      /malformed/,
    );
  }
});
