// A Node.js team's first day with Sundial, against a real stack started by the Python
// test that runs this (tests/e2e/test_node_client.py passes its address, a tenant token
// and the tenant's signing secret): @grpc/grpc-js with @grpc/proto-loader straight from
// proto/, a job with its own id applied twice, a field violation read from the typed
// error details, and a real call's signature checked with this SDK's verifier.
import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer } from "node:http";
import { test } from "node:test";

import { existsSync } from "node:fs";
import { join } from "node:path";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import protobuf from "protobufjs";

import { verifySignature } from "../dist/index.js";
import { startTarget } from "../examples/grpc-target.mjs";

const env = process.env;
const configured = Boolean(env.SUNDIAL_API && env.SUNDIAL_TOKEN);

function client() {
  const definition = protoLoader.loadSync("sundial/v1/job_service.proto", {
      includeDirs: [env.SUNDIAL_PROTO_PATH, env.SUNDIAL_GOOGLE_PROTO_PATH],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: false,
      oneofs: true,
  });
  const loaded = grpc.loadPackageDefinition(definition);
  const jobs = new loaded.sundial.v1.JobService(env.SUNDIAL_API, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${env.SUNDIAL_TOKEN}`);
  const call = (method, request) =>
    new Promise((resolve, reject) =>
      jobs[method](request, metadata, { deadline: Date.now() + 20_000 }, (error, answer) =>
        error ? reject(error) : resolve(answer),
      ),
    );
  return { call, close: () => jobs.close() };
}

function errorTypes() {
  // google.rpc's protos (the grpc-status-details-bin trailer), decoded with protobufjs.
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    const found = [env.SUNDIAL_GOOGLE_PROTO_PATH, env.SUNDIAL_PROTO_PATH]
      .map((dir) => join(dir, target))
      .find((path) => existsSync(path));
    return found ?? target;
  };
  root.loadSync(["google/rpc/status.proto", "google/rpc/error_details.proto"], { keepCase: true });
  return (name) => root.lookupType(name);
}

test("a Node client uses Sundial end to end", { skip: !configured, timeout: 60_000 }, async () => {
  const calls = [];
  const target = createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      calls.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200).end("ok");
    });
  });
  target.listen(0, "127.0.0.1");
  await once(target, "listening");
  const url = `http://127.0.0.1:${target.address().port}/hook`;
  const { call, close } = client();
  try {
    const job = {
      job_id: "node-nightly",
      name: "node nightly",
      schedule: { cron: "0 3 * * *", time_zone: "Europe/Berlin" },
      target: { http: { url } },
      payload: Buffer.from('{"from": "node"}'),
      labels: { team: "node" },
    };
    // A job with an id of its own, applied twice: created, then unchanged.
    const first = await call("ApplyJob", { job });
    assert.equal(first.outcome, "APPLY_OUTCOME_CREATED");
    assert.equal(first.job.job_id, "node-nightly");
    assert.match(first.job.uid, /^[0-9a-f-]{36}$/);
    const second = await call("ApplyJob", { job });
    assert.equal(second.outcome, "APPLY_OUTCOME_UNCHANGED");
    assert.equal(second.job.version, first.job.version);
    const fetched = await call("GetJob", { job_id: "node-nightly" });
    assert.equal(fetched.job.uid, first.job.uid);

    // A bad cron: INVALID_ARGUMENT, and a BadRequest naming the field in the details.
    const bad = await call("CreateJob", {
      job: { ...job, job_id: "node-bad", name: "bad", schedule: { cron: "61 * * * *" } },
    }).then(
      () => assert.fail("a bad cron was accepted"),
      (error) => error,
    );
    assert.equal(bad.code, grpc.status.INVALID_ARGUMENT);
    const [detailsBin] = bad.metadata.get("grpc-status-details-bin");
    assert.ok(detailsBin, "no grpc-status-details-bin trailer");
    const type = errorTypes();
    const status = type("google.rpc.Status").decode(detailsBin);
    assert.equal(status.code, grpc.status.INVALID_ARGUMENT);
    const byType = Object.fromEntries(
      status.details.map((detail) => [detail.type_url.split("/").pop(), detail.value]),
    );
    const badRequest = type("google.rpc.BadRequest").decode(byType["google.rpc.BadRequest"]);
    assert.equal(badRequest.field_violations[0].field, "schedule.cron");
    assert.equal(type("google.rpc.ErrorInfo").decode(byType["google.rpc.ErrorInfo"]).domain, "sundial");

    // A real call: trigger the job, and check the signature the target got.
    const triggered = await call("TriggerJob", { job_id: "node-nightly" });
    const deadline = Date.now() + 30_000;
    while (calls.length === 0) {
      assert.ok(Date.now() < deadline, "the target was never called");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const [got] = calls;
    assert.equal(got.headers["idempotency-key"], triggered.run.run_key);
    assert.equal(got.body.toString(), '{"from": "node"}');
    const signed = {
      header: got.headers["sundial-signature"],
      idempotencyKey: got.headers["idempotency-key"],
      attempt: got.headers["sundial-attempt"],
      body: got.body,
    };
    verifySignature(signed, { secrets: [env.SUNDIAL_SIGNING_SECRET] });
    assert.throws(() => verifySignature(signed, { secrets: ["not-the-secret"] }), /matches none/);
    // Bound to the run's purpose and this target: refused as sent anywhere else.
    const bound = { secrets: [env.SUNDIAL_SIGNING_SECRET], purpose: "run" };
    verifySignature(signed, { ...bound, destination: url });
    assert.throws(
      () => verifySignature(signed, { ...bound, destination: `${url}/elsewhere` }),
      /matches none/,
    );

    // The example gRPC target (examples/grpc-target.mjs): a run called there succeeds,
    // its signature checked and its work done once per idempotency key.
    const grpcTarget = await startTarget({
      address: "127.0.0.1:0",
      protoPath: env.SUNDIAL_PROTO_PATH,
      secrets: [env.SUNDIAL_SIGNING_SECRET],
      work: (request) => `done ${request.run_key}`,
    });
    try {
      const grpcJob = {
        job_id: "node-grpc",
        name: "node grpc",
        schedule: { cron: "0 3 * * *" },
        target: { grpc: { address: `127.0.0.1:${grpcTarget.port}`, plaintext: true } },
        payload: Buffer.from("grpc payload"),
      };
      assert.equal((await call("ApplyJob", { job: grpcJob })).outcome, "APPLY_OUTCOME_CREATED");
      const run = (await call("TriggerJob", { job_id: "node-grpc" })).run;
      const until = Date.now() + 30_000;
      let status = "";
      while (status !== "RUN_STATUS_SUCCEEDED") {
        assert.ok(Date.now() < until, `the gRPC run never succeeded (last: ${status})`);
        await new Promise((resolve) => setTimeout(resolve, 200));
        status = (await call("GetRun", { run_key: run.run_key })).run.status;
      }
      assert.deepEqual([...grpcTarget.done.keys()], [run.run_key]);
    } finally {
      grpcTarget.server.forceShutdown();
    }
  } finally {
    close();
    target.close();
  }
});
