// Compatibility harness: run one scenario against nats-server and keeld,
// started the same way (JetStream on, a store dir, a kernel-chosen port, a
// ports file), and compare what a client observes.
//
// A case is { name, run(ctx) -> observation, intended?, known? }.
// run() is called once per server with ctx = { kind, url, nc, server, uniq }
// and returns plain JSON data. Both observations are normalised (volatile
// fields removed, see VOLATILE and KEEL_EXTRA) and diffed field by field.
// Every differing path must be listed in the case:
//   intended: { path: 'why Keel differs on purpose' }
//   known:    { path: 'a difference not yet fixed (a finding)' }
// and every listed path must still differ, so the lists cannot go stale.
// The documented counts in docs/compat.md are checked by doc.test.mjs.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, before, after } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { connect } from 'nats';

const PORTS_WAIT_MS = 10000;
const STOP_WAIT_MS = 5000;
const POLL_MS = 10;

// Fields whose values differ between any two servers or runs: ids, names,
// versions, times, addresses. They are removed wherever they appear.
export const VOLATILE = new Set([
  'server_id', 'server_name', 'version', 'go', 'git_commit', 'host', 'port',
  'client_id', 'client_ip', 'nonce', 'xkey', 'connect_urls', 'created', 'ts',
  'first_ts', 'last_ts', 'time', 'last_active', 'leader', 'cluster',
  'java', 'proto_version', 'api', 'domain',
]);

// Fields keeld adds that nats-server 2.9.10 does not send, removed from
// keeld's side only. Keel speaks the 2.10 API (docs/protocol.md §1.2): clients
// read these when present and ignore them when absent.
export const KEEL_EXTRA = {
  consumer_limits: '2.10 stream config field',
  compression: '2.10 stream config field',
  metadata: '2.10 stream and consumer config field',
  num_subjects: '2.10 stream state field',
  num_deleted: '2.10 stream state field',
  keel_fsync: "Keel's own per-stream fsync policy (docs/config.md)",
  no_ack: 'stream config field nats-server fills only for mirrors',
  reserved_memory: '2.10 account info field',
  reserved_storage: '2.10 account info field',
  filter_subjects: '2.10 consumer config field',
};

// Remove VOLATILE keys everywhere; from keeld's side (ref = the
// normalised nats-server observation at the same place) also the
// KEEL_EXTRA keys nats-server did not send.
function normalise(v, keel, ref) {
  if (Array.isArray(v)) {
    return v.map((x, i) => normalise(x, keel, ref?.[i]));
  }
  if (v !== null && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) {
      if (VOLATILE.has(k) ||
        (keel && k in KEEL_EXTRA && !(ref !== null && typeof ref === 'object'
          && k in ref))) {
        continue;
      }
      out[k] = normalise(v[k], keel, ref?.[k]);
    }
    return out;
  }
  return v;
}

// n free loopback ports, for configurations that must name each other's
// ports up front (a cluster's routes). The kernel picks them; a port is
// closed again before a server binds it, a race no other test loses in
// practice because the kernel does not hand a just-freed port out again
// at once.
export async function freePorts(n) {
  const net = await import('node:net');
  const servers = [];
  for (let i = 0; i < n; i++) {
    const srv = net.createServer();
    await new Promise((r) => srv.listen(0, '127.0.0.1', r));
    servers.push(srv);
  }
  const ports = servers.map((srv) => srv.address().port);
  await Promise.all(servers.map((srv) => new Promise((r) => srv.close(r))));
  return ports;
}

// Paths where a and b differ ("" is the root; objects by key, arrays whole).
export function diff(a, b, path = '') {
  const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
  if (isObj(a) && isObj(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    const out = [];
    for (const k of [...keys].sort()) {
      out.push(...diff(a[k], b[k], path ? `${path}.${k}` : k));
    }
    return out;
  }
  return isDeepStrictEqual(a, b) ? [] : [path];
}

function readPorts(path) {
  try {
    const p = JSON.parse(readFileSync(path, 'utf8'));
    const urls = p.client ?? p.nats;
    return urls?.length > 0 ? p : null;
  } catch {
    return null; // not written yet
  }
}

// Start one server: kind 'nats' (nats-server) or 'keel' (keeld), with
// JetStream and its own store dir; extra arguments go last. Resolves to
// { kind, url, dir, portsFile, proc, stop() }.
// opts.args replaces the default arguments (store, address, port) and
// opts.keep leaves the directory for a restart (startOne(kind, [], {dir})).
export async function startOne(kind, extra = [], opts = {}) {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), `keel-compat-${kind}-`));
  const sd = join(dir, 'store');
  mkdirSync(sd, { recursive: true });
  const bin = kind === 'keel' ? process.env.KEELD : process.env.NATS_SERVER;
  const port = kind === 'keel' ? '0' : '-1'; // each one's "any port"
  const base = opts.args ?? ['-js', '-sd', sd, '-a', '127.0.0.1', '-p', port,
    ...(kind === 'keel' ? ['-m', '0'] : [])];
  const args = [...base, '--ports_file_dir', dir, ...extra];
  const proc = spawn(bin, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  let code = null;
  const exited = new Promise((resolve) => proc.on('exit', (c, sig) => {
    code = c ?? sig;
    resolve(code);
  }));
  const name = kind === 'keel' ? 'keeld' : 'nats-server';
  const portsFile = join(dir, `${name}_${proc.pid}.ports`);
  let ports = null;
  for (let w = 0; w < (opts.waitMs ?? PORTS_WAIT_MS) && ports === null &&
    code === null;
    w += POLL_MS) {
    ports = readPorts(portsFile);
    if (ports === null) {
      await delay(POLL_MS);
    }
  }
  const stop = async (signal = 'SIGTERM') => {
    if (code === null) {
      proc.kill(signal);
      const t = delay(STOP_WAIT_MS, 'timeout', { ref: false });
      if ((await Promise.race([exited, t])) === 'timeout') {
        proc.kill('SIGKILL');
        await exited;
      }
    }
    if (!opts.keep) {
      rmSync(dir, { recursive: true, force: true });
    }
    return code;
  };
  if (ports === null) {
    const c = await stop();
    if (opts.mayFail) {
      return { kind, failed: true, code: c, stderr };
    }
    throw new Error(`${bin} wrote no ports file (exit ${code}): ${stderr}`);
  }
  return {
    kind, dir, portsFile, proc, stop, stderr: () => stderr,
    ports, url: (ports.client ?? ports.nats)[0],
  };
}

let caseCount = 0;

// Register the cases of one test file: one nats-server and one keeld for
// the whole file, one nats.js connection to each, then one node:test test
// per case that runs the scenario on both and compares.
// shared: false starts nothing (start-up and stop cases start their own);
// setup(kind) replaces startOne (a cluster) and resolves to { url, stop }.
export function compatSuite(cases, { serverArgs = {}, shared = true,
  setup = null } = {}) {
  const servers = {};
  const conns = {};
  before(async () => {
    for (const kind of shared ? ['nats', 'keel'] : []) {
      servers[kind] = setup !== null ? await setup(kind)
        : await startOne(kind, serverArgs[kind] ?? []);
      conns[kind] = await connect({ servers: servers[kind].url });
    }
  });
  after(async () => {
    for (const kind of ['nats', 'keel']) {
      await conns[kind]?.close();
      await servers[kind]?.stop();
    }
  });
  for (const c of cases) {
    caseCount++;
    const uniq = `C${caseCount}`;
    test(c.name, async (t) => {
      const obs = {};
      for (const kind of ['nats', 'keel']) {
        const ctx = { kind, url: servers[kind]?.url, nc: conns[kind],
          server: servers[kind], uniq };
        obs[kind] = normalise(await c.run(ctx), kind === 'keel', obs.nats);
      }
      checkCase(t, c, obs.nats, obs.keel);
    });
  }
}

function checkCase(t, c, nats, keel) {
  const listed = { ...(c.intended ?? {}), ...(c.known ?? {}) };
  const paths = diff(nats, keel);
  const unlisted = paths.filter((p) => !(p in listed));
  const stale = Object.keys(listed).filter((p) => !paths.includes(p));
  for (const p of paths.filter((x) => x in listed)) {
    const why = c.intended?.[p] !== undefined ? 'intended' : 'known';
    t.diagnostic(`${why} difference at '${p}': ${listed[p]}`);
  }
  if (unlisted.length > 0 || stale.length > 0) {
    const show = (o, p) => JSON.stringify(p === '' ? o : p.split('.')
      .reduce((x, k) => (x == null ? x : x[k]), o));
    const lines = unlisted.map((p) =>
      `  differs at '${p}': nats-server ${show(nats, p)}, keeld ${show(keel, p)}`);
    lines.push(...stale.map((p) =>
      `  listed difference at '${p}' no longer differs: remove it`));
    throw new Error(`${c.name}:\n${lines.join('\n')}\n` +
      `nats-server: ${JSON.stringify(nats)}\nkeeld:       ${JSON.stringify(keel)}`);
  }
}

// Bounded poll for cond(): the nats.js suite's helper.
export { waitFor } from '../js/harness.mjs';

// A raw client-protocol session: connect, read INFO, optionally send
// CONNECT (connect: its fields, or null for none), then `send`, and collect
// the lines the server writes until `pongs` PONGs arrived, it closed, or
// ms passed. Resolves to { info, lines, closed }.
export async function rawSession(url, send, { connect: fields = {}, pongs = 1,
  ms = 3000 } = {}) {
  // Real clients send verbose and pedantic explicitly; nats-server
  // defaults both to true when they are absent (a case checks that).
  const conn = fields === null ? null
    : { verbose: false, pedantic: false, ...fields };
  const net = await import('node:net');
  const u = new URL(url);
  const sock = net.connect(Number(u.port), u.hostname);
  let buf = '';
  let info = null;
  let closed = false;
  let wake = null;
  sock.on('data', (d) => { buf += d.toString('latin1'); wake?.(); });
  sock.on('close', () => { closed = true; wake?.(); });
  sock.on('error', () => { closed = true; wake?.(); });
  const until = async (cond) => {
    const end = Date.now() + ms;
    while (!cond() && !closed && Date.now() < end) {
      await Promise.race([new Promise((r) => { wake = r; }),
        delay(Math.max(1, end - Date.now()))]);
    }
  };
  await until(() => buf.includes('\r\n'));
  const nl = buf.indexOf('\r\n');
  if (nl >= 0 && buf.startsWith('INFO ')) {
    info = JSON.parse(buf.slice(5, nl));
    buf = buf.slice(nl + 2);
  }
  if (!closed) {
    const head = conn === null ? '' : `CONNECT ${JSON.stringify(conn)}\r\n`;
    sock.write(head + send);
  }
  const count = () => buf.split('\r\n').filter((l) => l === 'PONG').length;
  await until(() => pongs > 0 && count() >= pongs);
  sock.destroy();
  const lines = buf.split('\r\n').filter((l) => l !== '');
  return { info, lines, closed };
}
