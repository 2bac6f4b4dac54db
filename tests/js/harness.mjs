// Test harness: start one keeld on a kernel-chosen port and stop it by PID.
//
// keeld writes <dir>/keeld_<pid>.ports once it listens; we poll for that file
// (bounded) instead of sleeping. KEEL_TEST_NATS_SERVER=<path> runs the same
// tests against nats-server, to tell a client bug from a server bug.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';

const PORTS_WAIT_MS = 10000;
const POLL_MS = 20;
const STOP_WAIT_MS = 5000;

function serverCommand(dir, extra) {
  const keeld = process.env.KEELD;
  if (keeld) {
    const data = join(dir, 'data');
    mkdirSync(data);
    return {
      cmd: keeld,
      name: 'keeld',
      args: ['-a', '127.0.0.1', '-p', '0', '-m', '0', '-sd', data,
        '--ports_file_dir', dir, ...extra],
    };
  }
  const nats = process.env.KEEL_TEST_NATS_SERVER;
  if (nats) {
    const data = join(dir, 'data');
    mkdirSync(data);
    return {
      cmd: nats,
      name: 'nats-server',
      args: ['-a', '127.0.0.1', '-p', '-1', '-js', '-sd', data,
        '--ports_file_dir', dir],
    };
  }
  throw new Error('set KEELD to the keeld binary (meson test sets it)');
}

// The ports file's URLs by kind (client, monitoring, cluster), or null.
function readPorts(path) {
  try {
    const ports = JSON.parse(readFileSync(path, 'utf8'));
    const urls = ports.client ?? ports.nats;
    return urls && urls.length > 0 ? ports : null;
  } catch {
    return null; // not written yet
  }
}

function portOf(url) {
  return url ? Number(url.slice(url.lastIndexOf(':') + 1)) : -1;
}

// Start a server; resolves to { url, stop }. stop() sends SIGTERM to the PID
// we started, waits (bounded) for it to exit, then removes the temp dir.
// extra: more keeld arguments (keeld only). The result also has kill()
// (SIGKILL, resolves when it exited), http (monitoring port) and
// clusterUrl (when it listens for cluster links).
export async function startServer(extra = []) {
  const dir = mkdtempSync(join(tmpdir(), 'keel-js-'));
  const { cmd, name, args } = serverCommand(dir, extra);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  let code = null;
  exited.then((c) => { code = c ?? -1; });

  const portsFile = join(dir, `${name}_${proc.pid}.ports`);
  const wantCluster = extra.includes('--cluster');
  let ports = null;
  for (let waited = 0; waited < PORTS_WAIT_MS && ports === null;
    waited += POLL_MS) {
    if (code !== null) {
      break;
    }
    ports = readPorts(portsFile);
    if (ports !== null && wantCluster && !(ports.cluster?.length > 0)) {
      ports = null; // the cluster listener is not up yet
    }
    if (ports === null) {
      await delay(POLL_MS);
    }
  }
  const url = ports !== null ? (ports.client ?? ports.nats)[0] : null;
  const stop = async () => {
    if (code === null) {
      proc.kill('SIGTERM');
      const timer = delay(STOP_WAIT_MS, 'timeout', { ref: false });
      if ((await Promise.race([exited, timer])) === 'timeout') {
        proc.kill('SIGKILL');
        await exited;
      }
    }
    rmSync(dir, { recursive: true, force: true });
    return code;
  };
  if (url === null) {
    await stop();
    throw new Error(`${cmd} wrote no ports file within ${PORTS_WAIT_MS} ms` +
      ` (exit ${code}): ${stderr}`);
  }
  const kill = async () => {
    if (code === null) {
      proc.kill('SIGKILL');
      await exited;
    }
  };
  return {
    url,
    name,
    stop,
    kill,
    stderr: () => stderr,
    http: portOf(ports.monitoring?.[0]),
    clusterUrl: ports.cluster?.[0] ?? null,
  };
}

// Collect up to `max` messages from `sub`, giving up after `ms`.
export async function collect(sub, max, ms = 5000) {
  const timer = setTimeout(() => sub.unsubscribe(), ms);
  const got = [];
  for await (const m of sub) {
    got.push(m);
    if (got.length >= max) {
      break;
    }
  }
  clearTimeout(timer);
  return got;
}

// Bounded poll: resolves when cond() (may be async) is true, throws after
// ms with what.
export async function waitFor(cond, ms, what) {
  for (let waited = 0; waited < ms; waited += POLL_MS) {
    if (await cond()) {
      return;
    }
    await delay(POLL_MS);
  }
  throw new Error(`${what}: not within ${ms} ms`);
}

async function numRoutes(server) {
  try {
    const r = await fetch(`http://127.0.0.1:${server.http}/routez`);
    return (await r.json()).num_routes;
  } catch {
    return -1; // not answering (yet)
  }
}

// A keeld cluster of n nodes n1..nN on loopback (keeld only): node 1
// alone, then each with --routes to the running ones (gossip completes the
// mesh); resolves once every node has n-1 links. stop() stops every node.
// more: keeld arguments every node gets (e.g. ['-c', conf]).
export async function startCluster(n, clusterName, more = []) {
  const nodes = [];
  const stop = async () => {
    for (const s of nodes) {
      await s.stop();
    }
  };
  try {
    for (let i = 0; i < n; i++) {
      const extra = ['-n', `n${i + 1}`, '--cluster', 'nats://127.0.0.1:0',
        '--cluster_name', clusterName, ...more];
      if (nodes.length > 0) {
        extra.push('--routes', nodes.map((s) => s.clusterUrl).join(','));
      }
      nodes.push(await startServer(extra));
    }
    await waitFor(async () => {
      for (const s of nodes) {
        if (await numRoutes(s) !== n - 1) {
          return false;
        }
      }
      return true;
    }, PORTS_WAIT_MS, `a full mesh of ${n} nodes`);
  } catch (e) {
    await stop();
    throw e;
  }
  return { nodes, stop };
}

// Close nc and stop server (either may be unset, when before() failed);
// asserts keeld exited cleanly.
export async function closeAndStop(nc, server) {
  if (nc) {
    await nc.close();
  }
  if (server) {
    const code = await server.stop();
    if (server.name === 'keeld' && !(code === 0 || code === null)) {
      throw new Error(`keeld exit ${code}`);
    }
  }
}

// startServer and a nats.js v2 connection to it (connect: the 'nats'
// package's) with its JetStream manager (which asks $JS.API.INFO first)
// and client: the setup most files share. When a step fails, what it
// started is closed and stopped before the error is thrown.
export async function startJetStream(connect) {
  const server = await startServer();
  let nc;
  try {
    nc = await connect({ servers: server.url, timeout: 5000 });
    const jsm = await nc.jetstreamManager();
    return { server, nc, jsm, js: nc.jetstream() };
  } catch (e) {
    await closeAndStop(nc, server);
    throw e;
  }
}

// The JetStream API error of a rejected promise; throws when it resolved.
export async function apiError(p) {
  try {
    await p;
  } catch (e) {
    // nats.js v2 has api_error, v3 (JetStreamApiError) apiError().
    return e.api_error ?? (typeof e.apiError === 'function' ? e.apiError() : null) ??
      { description: e.message };
  }
  throw new Error('the request was accepted');
}
