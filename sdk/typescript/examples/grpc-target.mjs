// An idempotent gRPC target for Sundial in Node.js: a TargetService server that checks
// every call's signature with @sundial/sdk and applies each run once, however often it
// is delivered (a retry after a timeout, an executor crash, a replay).
//
//   SUNDIAL_SIGNING_SECRET=... PROTO_PATH=path/to/sundial/proto node examples/grpc-target.mjs
//
// Then give a job `target: {grpc: {address: "<host>:50061"}}` (TLS in production; here
// plaintext, for a target on the same machine). The signature is checked for purpose
// "run" and the address the job names (TARGET_DESTINATION, default: the listening
// address), so a call signed for another target or a notification is refused.
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import { SignatureError, verifySignature } from "../dist/index.js";

/**
 * Starts a TargetService on `address`; `work(request)` is the job's business logic.
 * Resolves to `{ server, port, done }`: `done` maps each idempotency key to the first
 * result, so a run delivered twice is done once.
 */
export async function startTarget({ address, protoPath, secrets, work, destination }) {
  let signedFor = destination; // the address as the job names it; set once bound

  const definition = protoLoader.loadSync("sundial/v1/target.proto", {
    includeDirs: [protoPath],
    keepCase: true,
    longs: String,
    defaults: true,
  });
  const { TargetService } = grpc.loadPackageDefinition(definition).sundial.v1;
  const done = new Map();
  const server = new grpc.Server();
  server.addService(TargetService.service, {
    Execute(call, callback) {
      const metadata = call.metadata.getMap();
      try {
        verifySignature(
          {
            header: String(metadata["sundial-signature"] ?? ""),
            idempotencyKey: call.request.idempotency_key,
            attempt: call.request.attempt,
            body: call.request.payload,
          },
          { secrets, purpose: "run", destination: signedFor },
        );
      } catch (error) {
        // Not from Sundial (or altered): a permanent failure, never retried.
        const code = error instanceof SignatureError ? grpc.status.PERMISSION_DENIED : grpc.status.INTERNAL;
        callback({ code, details: error.message });
        return;
      }
      const key = call.request.idempotency_key;
      if (!done.has(key)) {
        done.set(key, work(call.request));
      }
      callback(null, { message: done.get(key) });
    },
  });
  const port = await new Promise((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  signedFor ??= address.replace(/:\d+$/, `:${port}`);
  return { server, port, done };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { port } = await startTarget({
    address: process.env.TARGET_ADDRESS ?? "127.0.0.1:50061",
    protoPath: process.env.PROTO_PATH ?? new URL("../../../proto", import.meta.url).pathname,
    secrets: [process.env.SUNDIAL_SIGNING_SECRET],
    destination: process.env.TARGET_DESTINATION,
    work: (request) => `report for ${request.scheduled_at?.seconds ?? "?"} sent`,
  });
  console.log(`TargetService listening on port ${port}`);
}
