// Retention bench (docs/design.md §5 S2): publish N messages with acks
// (window W) to a fresh stream RET with max_msgs 1000 on a running keeld and
// print the data directory's disk use every STEP publishes.
// usage: node bench/retention_bench.mjs NATS_URL DATA_DIR N [STEP]
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const { connect } = require("../tests/js/node_modules/nats");
import { execSync } from "node:child_process";
const [url, dir, total, stepArg] = process.argv.slice(2);
const N = Number(total), STEP = Number(stepArg || 100000), W = 512;
const nc = await connect({ servers: url });
const jsm = await nc.jetstreamManager();
try { await jsm.streams.delete("RET"); } catch (e) {}
await jsm.streams.add({ name: "RET", subjects: ["ret.>"], max_msgs: 1000 });
const js = nc.jetstream();
const payload = new Uint8Array(128);
const du = () => execSync(`du -sk ${dir}`).toString().split("\t")[0];
const t0 = Date.now();
let inflight = [];
for (let i = 1; i <= N; i++) {
  inflight.push(js.publish("ret.x", payload));
  if (inflight.length >= W) { await Promise.all(inflight); inflight = []; }
  if (i % STEP === 0) {
    await Promise.all(inflight); inflight = [];
    const si = await jsm.streams.info("RET");
    console.log(JSON.stringify({ published: i, disk_kib: Number(du()), msgs: si.state.messages,
      first_seq: si.state.first_seq, last_seq: si.state.last_seq, secs: (Date.now() - t0) / 1000 }));
  }
}
await nc.close();
