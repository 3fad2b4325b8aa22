// The TypeScript verifier against signatures made by Sundial's own signing code: the
// Python test that runs this (tests/unit/test_typescript_sdk.py) writes them to the JSON
// file named by SUNDIAL_SIGNATURE_VECTORS.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Webhook } from "standardwebhooks";

import {
  SignatureError,
  keyId,
  standardWebhookSecret,
  verifySignature,
} from "../dist/index.js";

const path = process.env.SUNDIAL_SIGNATURE_VECTORS;
const vectors = () => JSON.parse(readFileSync(path, "utf8"));

const callOf = (v) => ({
  header: v.header,
  idempotencyKey: v.idempotency_key,
  attempt: v.attempt,
  body: Buffer.from(v.body_base64, "base64"),
});

test("v2 signatures verify for their purpose and destination only", { skip: !path }, () => {
  const all = vectors();
  assert.ok(all.length >= 3);
  for (const v of all) {
    const call = callOf(v);
    const now = v.t + 10;
    const bound = { purpose: v.purpose, destination: v.destination, now };
    verifySignature(call, { secrets: v.secrets, ...bound });
    // Any one of the secrets signing is enough (a rotation's overlap): one v2 each.
    verifySignature(call, { secrets: [v.secrets.at(-1)], ...bound });
    for (const secret of v.secrets) assert.ok(call.header.includes(`v2=${keyId(secret)}:`));
    assert.throws(() => verifySignature(call, { secrets: ["wrong"], ...bound }), SignatureError);
    // Replayed to another target of the tenant, or as another kind of message.
    assert.throws(
      () => verifySignature(call, { secrets: v.secrets, ...bound, destination: "https://other.example.com/x" }),
      /matches none/,
    );
    const other = v.purpose === "run" ? "notification" : "run";
    assert.throws(
      () => verifySignature(call, { secrets: v.secrets, ...bound, purpose: other }),
      /matches none/,
    );
    assert.throws(
      () => verifySignature({ ...call, attempt: v.attempt + 1 }, { secrets: v.secrets, ...bound }),
      /matches none/,
    );
    assert.throws(
      () =>
        verifySignature(
          { ...call, body: Buffer.concat([call.body, Buffer.from("x")]) },
          { secrets: v.secrets, ...bound },
        ),
      /matches none/,
    );
    assert.throws(
      () => verifySignature(call, { secrets: v.secrets, ...bound, now: v.t + 301 }),
      /outside the tolerance/,
    );
  }
});

test("v1 keeps verifying during the transition, and only when asked", { skip: !path }, () => {
  for (const v of vectors()) {
    const call = callOf(v);
    const now = v.t + 10;
    // A verifier written before v2 (no purpose, no destination) reads the v1 values.
    verifySignature(call, { secrets: v.secrets, now });
    // A header from a signer that only knows v1.
    const v1Only = {
      ...call,
      header: call.header.split(",").filter((p) => !p.startsWith("v2=")).join(","),
    };
    const bound = { purpose: v.purpose, destination: v.destination, now };
    assert.throws(() => verifySignature(v1Only, { secrets: v.secrets, ...bound }), /no v2/);
    verifySignature(v1Only, { secrets: v.secrets, ...bound, acceptV1: true });
    assert.throws(
      () => verifySignature(v1Only, { secrets: ["wrong"], ...bound, acceptV1: true }),
      /matches none/,
    );
  }
});

test("the standardwebhooks library verifies the Standard Webhooks headers", { skip: !path }, () => {
  let checked = 0;
  for (const v of vectors()) {
    if (!v.webhook_headers) continue;
    const body = Buffer.from(v.body_base64, "base64").toString("utf8");
    const signatures = v.webhook_headers["webhook-signature"].split(" ");
    assert.equal(signatures.length, v.secrets.length);
    for (const secret of v.secrets) {
      // Each secret of a rotation's overlap verifies on its own.
      const whsec = standardWebhookSecret(secret, { purpose: v.purpose, destination: v.destination });
      new Webhook(whsec).verify(body, v.webhook_headers);
      const elsewhere = standardWebhookSecret(secret, {
        purpose: v.purpose,
        destination: "https://other.example.com/x",
      });
      assert.throws(() => new Webhook(elsewhere).verify(body, v.webhook_headers), /No matching/);
      checked += 1;
    }
  }
  assert.ok(checked >= 3);
});

test("a malformed header is refused with a reason", () => {
  for (const header of ["", "t=abc,v1=00", "v1=00", "t=1"]) {
    assert.throws(
      () => verifySignature({ header, idempotencyKey: "k", attempt: 1, body: "" }, { secrets: ["s"] }),
      /malformed/,
    );
  }
  assert.throws(
    () =>
      verifySignature(
        { header: "t=1,v2=a:b", idempotencyKey: "k", attempt: 1, body: "" },
        { secrets: ["s"], purpose: "run" },
      ),
    /together/,
  );
});
