// Finish a longcall job from outside Python: sign a completion as Standard Webhooks does
// and post it to `longcall serve`. Node.js 18 or newer; nothing to install.
//
//   WEBHOOK_SECRET=whsec_... node send.mjs URL SOURCE JOB_ID RESULT_JSON
//   WEBHOOK_SECRET=whsec_... node send.mjs http://127.0.0.1:8800 batch report-1 '{"rows": 48213}'
//
// WEBHOOK_ID names the delivery (default: a new random id). Send the same id again, as a
// sender retrying after a lost answer does, and longcall answers `duplicate`, changing nothing.
// Exits 0 when longcall accepted the delivery (any 2xx), 1 when it refused it.

import { createHmac, randomUUID } from "node:crypto";

const [url, source, jobId, resultJson] = process.argv.slice(2);
const secret = process.env.WEBHOOK_SECRET ?? "";
if (!url || !source || !jobId || !resultJson || !secret.startsWith("whsec_")) {
  console.error("usage: WEBHOOK_SECRET=whsec_... node send.mjs URL SOURCE JOB_ID RESULT_JSON");
  process.exit(2);
}

const body = JSON.stringify({ jobId, type: "complete", result: JSON.parse(resultJson) });
const id = process.env.WEBHOOK_ID ?? `msg_${randomUUID().replaceAll("-", "")}`;
const timestamp = Math.floor(Date.now() / 1000).toString();

// Standard Webhooks: HMAC-SHA256 over "id.timestamp.body", keyed with the base64 part of the
// secret after "whsec_", sent base64-encoded as "v1,<signature>".
const key = Buffer.from(secret.slice("whsec_".length), "base64");
const signature = createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64");

const response = await fetch(`${url.replace(/\/$/, "")}/v1/hooks/${encodeURIComponent(source)}`, {
  method: "POST",
  headers: {
    "content-type": "application/json",
    "webhook-id": id,
    "webhook-timestamp": timestamp,
    "webhook-signature": `v1,${signature}`,
  },
  body,
});
console.log(`${response.status} ${await response.text()}`);
process.exit(response.ok ? 0 : 1);
