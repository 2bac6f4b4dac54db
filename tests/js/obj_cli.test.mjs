// keel object against nats.js v3 (@nats-io/obj) on one keeld, both ways:
// an object `keel object put` stored is read byte for byte by @nats-io/obj
// with its digest check, and one @nats-io/obj stored is written byte for
// byte by `keel object get`; deletes and links cross over too. The keel
// binary comes from $KEEL (meson test sets it); without it these skip.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { Objm } from '@nats-io/obj';
import { closeAndStop, startServer } from './harness.mjs';
import { digestOf, readable } from './os_cases.mjs';

const BIG_BYTES = 3 * 1024 * 1024;
const CHUNK_BYTES = 128 * 1024;
const KEEL_WAIT_MS = 30000;

describe('keel object and @nats-io/obj on keeld', {
  skip: process.env.KEEL ? false : 'KEEL is not set (meson test sets it)',
}, () => {
  let server;
  let nc;
  let objm;
  let dir;

  // Run keel with args and an empty stdin; resolves to { code, stdout,
  // stderr } (never rejects on a non-zero exit: the tests assert the code).
  const keel = (...args) => new Promise((resolve) => {
    const child = execFile(process.env.KEEL, args, {
      env: { ...process.env, NATS_URL: server.url },
      timeout: KEEL_WAIT_MS,
      maxBuffer: 4 * BIG_BYTES,
    }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? -1) : 0, stdout, stderr });
    });
    child.stdin.end();
  });

  before(async () => {
    server = await startServer();
    nc = await connect({ servers: server.url, timeout: 5000 });
    objm = new Objm(nc);
    dir = mkdtempSync(join(tmpdir(), 'keel-obj-'));
  });

  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await closeAndStop(nc, server);
  });

  it('an object keel puts is read byte for byte by @nats-io/obj',
    async () => {
      const data = randomFillSync(new Uint8Array(BIG_BYTES));
      const file = join(dir, 'from-keel.bin');
      writeFileSync(file, data);
      let r = await keel('object', 'add', 'KEELPUT');
      assert.equal(r.code, 0, r.stderr);
      r = await keel('object', 'put', 'KEELPUT', file, '--name', 'big.bin');
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stderr, ''); // no progress bar without a terminal

      const os = await objm.open('KEELPUT');
      const info = await os.info('big.bin');
      assert.equal(info.size, BIG_BYTES);
      assert.equal(info.chunks, BIG_BYTES / CHUNK_BYTES);
      assert.equal(info.digest, digestOf(data));
      const got = await os.get('big.bin');
      const parts = [];
      for await (const p of got.data) {
        parts.push(p);
      }
      assert.equal((await got.error) ?? null, null); // the digest matched
      assert.ok(Buffer.from(data).equals(Buffer.concat(parts)));
    });

  it('an object @nats-io/obj puts is written byte for byte by keel get',
    async () => {
      const data = randomFillSync(new Uint8Array(BIG_BYTES));
      const os = await objm.create('JSPUT');
      // Pieces that do not line up with chunks: the client re-chunks.
      const info = await os.put({ name: 'dir/big.bin' },
        readable(data, 100 * 1000));
      assert.equal(info.digest, digestOf(data));
      const out = join(dir, 'from-js.bin');
      const r = await keel('object', 'get', 'JSPUT', 'dir/big.bin', '-O', out);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^Wrote: 3\.0 MiB to /);
      assert.ok(Buffer.from(data).equals(readFileSync(out)));
      const ls = await keel('object', 'ls', 'JSPUT', '--names');
      assert.equal(ls.stdout, 'dir/big.bin\n');
    });

  it('deletes cross over: each side sees the other\'s delete', async () => {
    const os = await objm.create('DELS');
    await os.putBlob({ name: 'by-js' }, new TextEncoder().encode('one'));
    let r = await keel('object', 'put', 'DELS', '--name', 'by-keel');
    // stdin is empty here: a zero-byte object
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await os.info('by-keel')).size, 0);
    assert.equal((await os.getBlob('by-keel')).length, 0);

    r = await keel('object', 'rm', 'DELS', 'by-keel', '-f');
    assert.equal(r.code, 0, r.stderr);
    assert.equal((await os.info('by-keel')).deleted, true);
    assert.equal(await os.get('by-keel'), null);

    await os.delete('by-js');
    r = await keel('object', 'get', 'DELS', 'by-js', '-O', join(dir, 'x'));
    assert.equal(r.code, 1);
    assert.match(r.stderr, /object by-js was deleted/);
    // One meta per object, no chunks left.
    const si = await (await os.status()).streamInfo;
    assert.equal(si.state.messages, 2);
  });

  it('keel get follows a link @nats-io/obj made', async () => {
    const os = await objm.create('LINKS');
    const target = await os.putBlob({ name: 'real' },
      new TextEncoder().encode('payload'));
    await os.link('alias', target);
    const r = await keel('object', 'get', 'LINKS', 'alias', '-O', '-');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'payload');
  });
  it('keel put -H headers and add --metadata are what @nats-io/obj reads',
    async () => {
      let r = await keel('obj', 'add', 'HDRS', '--metadata', 'owner=ops');
      assert.equal(r.code, 0, r.stderr);
      const file = join(dir, 'h.txt');
      writeFileSync(file, 'with headers');
      r = await keel('object', 'put', 'HDRS', file, '--name', 'h.txt',
        '-H', 'Content-Type: text/plain', '-H', 'X-A:1', '-H', 'X-A:2');
      assert.equal(r.code, 0, r.stderr);
      const os = await objm.open('HDRS');
      const info = await os.info('h.txt');
      assert.equal(info.headers.get('Content-Type'), 'text/plain');
      assert.deepEqual(info.headers.values('X-A'), ['1', '2']);
      const st = await os.status();
      assert.equal(st.metadata.owner, 'ops');
    });

  it('a bucket sealed by either side is sealed for the other', async () => {
    const os = await objm.create('SEALJS');
    await os.putBlob({ name: 'kept' }, new TextEncoder().encode('kept'));
    await os.seal();
    let r = await keel('object', 'info', 'SEALJS');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Sealed: +true/);
    r = await keel('object', 'put', 'SEALJS', '--name', 'more');
    assert.equal(r.code, 1);

    r = await keel('object', 'add', 'SEALKEEL');
    assert.equal(r.code, 0, r.stderr);
    r = await keel('object', 'seal', 'SEALKEEL', '-f');
    assert.equal(r.code, 0, r.stderr);
    const os2 = await objm.open('SEALKEEL');
    assert.equal((await os2.status()).sealed, true);
    await assert.rejects(os2.putBlob({ name: 'no' },
      new TextEncoder().encode('no')));
  });
});
