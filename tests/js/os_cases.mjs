// Object Store cases shared by nats.js v2 (js.views.os) and v3
// (@nats-io/obj): an object is a meta message on $O.<bucket>.M.<name> and
// chunks on $O.<bucket>.C.<nuid> in the stream OBJ_<bucket>; the client
// splits, digests and reassembles, the server stores, rolls up and purges.
//
// api = { open(bucket) -> os, streamInfo(name) -> info }.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomFillSync } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';

const WATCH_MS = 5000;
const BIG_BYTES = 3 * 1024 * 1024;
const CHUNK_BYTES_DEFAULT = 128 * 1024; // both clients' default

// The digest both clients write: "SHA-256=" + the SHA-256 in padded
// base64url.
export const digestOf = (data) => {
  const b64 = createHash('sha256').update(data).digest('base64');
  return `SHA-256=${b64.replace(/\+/g, '-').replace(/\//g, '_')}`;
};

export function readable(data, piece) {
  let off = 0;
  return new ReadableStream({
    pull(ctl) {
      if (off >= data.length) {
        ctl.close();
        return;
      }
      ctl.enqueue(data.subarray(off, off + piece));
      off += piece;
    },
  });
}

async function nextInfo(iter) {
  for (;;) {
    const r = await Promise.race([iter.next(),
      delay(WATCH_MS, 'timeout', { ref: false })]);
    if (r === 'timeout') {
      throw new Error(`object watch: nothing within ${WATCH_MS} ms`);
    }
    assert.equal(r.done, false, 'watch ended early');
    if (r.value !== null) { // v2 marks the end of initial values with null
      return r.value;
    }
  }
}

export function osCases(api) {
  let n = 0;
  const fresh = () => api.open(`files${++n}`);

  it('puts a 3 MiB object in chunks and gets it back byte for byte',
    async () => {
      const os = await fresh();
      const data = randomFillSync(new Uint8Array(BIG_BYTES));
      // Pieces that do not line up with chunks: the client re-chunks.
      const info = await os.put({ name: 'big.bin', description: 'blob' },
        readable(data, 100 * 1000));
      assert.equal(info.size, BIG_BYTES);
      assert.equal(info.chunks, BIG_BYTES / CHUNK_BYTES_DEFAULT);
      assert.equal(info.digest, digestOf(data));
      const si = await api.streamInfo(`OBJ_files${n}`);
      assert.equal(si.state.messages, info.chunks + 1);

      const r = await os.get('big.bin');
      const parts = [];
      for await (const p of r.data) {
        parts.push(p);
      }
      // null or undefined: the client checked the digest.
      assert.equal((await r.error) ?? null, null);
      const got = Buffer.concat(parts);
      assert.equal(got.length, BIG_BYTES);
      assert.equal(digestOf(got), digestOf(data));
      assert.ok(Buffer.from(data).equals(got));
    });

  it('reports info, lists objects and replaces one on a second put',
    async () => {
      const os = await fresh();
      await os.putBlob({ name: 'a.txt' }, new TextEncoder().encode('alpha'));
      await os.putBlob({ name: 'b.txt' }, new TextEncoder().encode('beta'));
      await os.putBlob({ name: 'a.txt' }, new TextEncoder().encode('ALPHA!'));
      const info = await os.info('a.txt');
      assert.equal(info.size, 6);
      assert.equal(info.deleted, false);
      assert.equal(await os.info('none'), null);
      const names = (await os.list()).map((i) => i.name).sort();
      assert.deepEqual(names, ['a.txt', 'b.txt']);
      assert.equal(new TextDecoder().decode(await os.getBlob('a.txt')),
        'ALPHA!');
      // The old chunks and meta of a.txt are gone: 2 objects, 1 chunk each.
      const si = await api.streamInfo(`OBJ_files${n}`);
      assert.equal(si.state.messages, 4);
    });

  it('deletes an object: its chunks go, its meta says deleted', async () => {
    const os = await fresh();
    const data = randomFillSync(new Uint8Array(5 * CHUNK_BYTES_DEFAULT));
    await os.putBlob({ name: 'tmp' }, data);
    await os.delete('tmp');
    assert.equal(await os.get('tmp'), null);
    const info = await os.info('tmp');
    assert.equal(info.deleted, true);
    assert.equal(info.size, 0);
    const si = await api.streamInfo(`OBJ_files${n}`);
    assert.equal(si.state.messages, 1); // the meta message alone
    const st = await os.status();
    assert.equal(st.sealed, false);
  });

  it('watches puts and deletes', async () => {
    const os = await fresh();
    const w = await os.watch();
    const it = w[Symbol.asyncIterator]();
    await os.putBlob({ name: 'w1' }, new TextEncoder().encode('one'));
    let i = await nextInfo(it);
    assert.equal(i.name, 'w1');
    assert.equal(i.deleted, false);
    await os.delete('w1');
    i = await nextInfo(it);
    assert.equal(i.name, 'w1');
    assert.equal(i.deleted, true);
    w.stop();
  });

  it('follows a link to an object', async () => {
    const os = await fresh();
    const target = await os.putBlob({ name: 'real' },
      new TextEncoder().encode('payload'));
    const link = await os.link('alias', target);
    assert.equal(link.options.link.name, 'real');
    assert.equal(new TextDecoder().decode(await os.getBlob('alias')),
      'payload');
    await assert.rejects(os.link('alias2', link)); // no links to links
  });
}
