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

function serverCommand(dir) {
  const keeld = process.env.KEELD;
  if (keeld) {
    const data = join(dir, 'data');
    mkdirSync(data);
    return {
      cmd: keeld,
      name: 'keeld',
      args: ['-a', '127.0.0.1', '-p', '0', '-m', '0', '-sd', data,
        '--ports_file_dir', dir],
    };
  }
  const nats = process.env.KEEL_TEST_NATS_SERVER;
  if (nats) {
    return {
      cmd: nats,
      name: 'nats-server',
      args: ['-a', '127.0.0.1', '-p', '-1', '--ports_file_dir', dir],
    };
  }
  throw new Error('set KEELD to the keeld binary (meson test sets it)');
}

function readPorts(path) {
  try {
    const ports = JSON.parse(readFileSync(path, 'utf8'));
    const urls = ports.client ?? ports.nats;
    return urls && urls.length > 0 ? urls[0] : null;
  } catch {
    return null; // not written yet
  }
}

// Start a server; resolves to { url, stop }. stop() sends SIGTERM to the PID
// we started, waits (bounded) for it to exit, then removes the temp dir.
export async function startServer() {
  const dir = mkdtempSync(join(tmpdir(), 'keel-js-'));
  const { cmd, name, args } = serverCommand(dir);
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  let code = null;
  exited.then((c) => { code = c ?? -1; });

  const portsFile = join(dir, `${name}_${proc.pid}.ports`);
  let url = null;
  for (let waited = 0; waited < PORTS_WAIT_MS && url === null;
    waited += POLL_MS) {
    if (code !== null) {
      break;
    }
    url = readPorts(portsFile);
    if (url === null) {
      await delay(POLL_MS);
    }
  }
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
  return { url, name, stop, stderr: () => stderr };
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
