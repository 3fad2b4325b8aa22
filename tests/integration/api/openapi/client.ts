// A client generated from Sundial's OpenAPI document (openapi-typescript writes
// ./schema.d.ts from /openapi.json; openapi-fetch makes the calls), as a team with no
// Sundial SDK for its language would write it. tsc checks it against the generated
// types before it runs: a request or answer that does not fit the document fails there.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Job = components["schemas"]["sundial.v1.Job"];

// The few Node globals used (no @types/node needed for them).
declare const process: { env: Record<string, string | undefined> };

const client = createClient<paths>({
  baseUrl: process.env.SUNDIAL_HTTP,
  headers: { Authorization: `Bearer ${process.env.SUNDIAL_TOKEN}` },
});

const job: Job = {
  jobId: "openapi-report",
  name: "report from openapi",
  schedule: { cron: "0 3 * * *", timeZone: "Europe/Berlin" },
  target: { http: { url: process.env.SUNDIAL_TARGET_URL ?? "" } },
  labels: { team: "openapi" },
};

const created = await client.POST("/sundial.v1.JobService/CreateJob", {
  body: { job, requestId: "openapi-create-1" },
});
if (created.error) throw new Error(`CreateJob: ${JSON.stringify(created.error)}`);

const listed = await client.POST("/sundial.v1.JobService/ListJobs", {
  body: { selector: "team=openapi", pageSize: 10 },
});
if (listed.error) throw new Error(`ListJobs: ${JSON.stringify(listed.error)}`);

const paused = await client.POST("/sundial.v1.JobService/PauseJobs", {
  body: { selector: "team=openapi", note: "from the generated client" },
});
if (paused.error) throw new Error(`PauseJobs: ${JSON.stringify(paused.error)}`);

const got = await client.POST("/sundial.v1.JobService/GetJob", { body: { jobId: job.jobId } });
if (got.error) throw new Error(`GetJob: ${JSON.stringify(got.error)}`);

// An error answers the document's ConnectError.
const refused = await client.POST("/sundial.v1.JobService/CreateJob", {
  body: { job: { ...job, jobId: "openapi-bad", schedule: { cron: "61 * * * *" } } },
});
const error = refused.error;

console.log(
  JSON.stringify({
    created: created.data.job,
    listed: (listed.data.jobs ?? []).map((j: Job) => j.jobId),
    paused: paused.data,
    got: got.data.job,
    error: { status: refused.response.status, code: error?.code, message: error?.message },
  }),
);
