// Key/Value cases shared by nats.js v2 (js.views.kv) and v3 (@nats-io/kv):
// the two clients have the same KV calls, so one list of cases runs on
// both, each against its own keeld (kv_v2.test.mjs, kv_v3.test.mjs).
//
// api = { open(bucket, opts) -> kv, streamInfo(name) -> info (throws when
// the stream is gone) }. Keys and values are bytes through TextEncoder, the
// one payload type both versions accept.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';

const enc = new TextEncoder();
const dec = new TextDecoder();
const WATCH_MS = 5000;
const VALUE_BYTES_MAX = 64;
export const BUCKET_OPTS = {
  description: 'application settings',
  history: 5,
  ttl: 3600 * 1000, // ms
  maxValueSize: VALUE_BYTES_MAX,
  replicas: 1,
};

export const b = (s) => enc.encode(s);
export const str = (e) => (e === null ? null : dec.decode(e.value));

// The next `n` entries of a watch as "key=value" ("key=-" for a delete or
// purge marker), waiting at most WATCH_MS for each.
export async function nextEntries(iter, n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const r = await Promise.race([iter.next(),
      delay(WATCH_MS, 'timeout', { ref: false })]);
    if (r === 'timeout') {
      throw new Error(`watch: entry ${i + 1} of ${n} not within ${WATCH_MS} ms` +
        ` (got ${JSON.stringify(out)})`);
    }
    assert.equal(r.done, false, 'watch ended early');
    const e = r.value;
    out.push(`${e.key}=${e.operation === 'PUT' ? str(e) : '-'}`);
  }
  return out;
}

async function historyOps(kv, key) {
  const ops = [];
  for await (const e of await kv.history({ key })) {
    ops.push(e.operation === 'PUT' ? 'P' : e.operation === 'DEL' ? 'D' : 'U');
  }
  return ops.join('');
}

// Each case opens its own bucket (named after the case) so cases do not
// see each other's keys.
export function kvCases(api) {
  let n = 0;
  const fresh = () => api.open(`APP${++n}`, BUCKET_OPTS);

  it('puts, gets and reports the bucket config in status', async () => {
    const kv = await fresh();
    const r1 = await kv.put('db.host', b('a'));
    const r2 = await kv.put('db.port', b('5432'));
    assert.equal(r2, r1 + 1);
    assert.equal(str(await kv.get('db.port')), '5432');
    const e = await kv.get('db.host', { revision: r1 });
    assert.equal(str(e), 'a');
    assert.equal(e.revision, r1);
    assert.equal(e.operation, 'PUT');
    assert.equal(await kv.get('missing'), null);
    const st = await kv.status();
    assert.equal(st.values, 2);
    assert.equal(st.history, 5);
    assert.equal(st.ttl, 3600 * 1000);
    assert.equal(st.replicas, 1);
    assert.equal(st.maxValueSize ?? st.max_value_size, VALUE_BYTES_MAX);
  });

  it('refuses a value over max value size and stores nothing', async () => {
    const kv = await fresh();
    await assert.rejects(kv.put('k', new Uint8Array(VALUE_BYTES_MAX + 1)));
    assert.equal(await kv.get('k'), null);
    await kv.put('k', new Uint8Array(VALUE_BYTES_MAX));
    assert.equal((await kv.get('k')).value.length, VALUE_BYTES_MAX);
  });

  it('refuses create when the key has a value, allows it after delete',
    async () => {
      const kv = await fresh();
      assert.ok(await kv.create('lock', b('me')) > 0);
      await assert.rejects(kv.create('lock', b('you')));
      assert.equal(str(await kv.get('lock')), 'me');
      await kv.delete('lock');
      await kv.create('lock', b('you'));
      assert.equal(str(await kv.get('lock')), 'you');
    });

  it('updates only with the current revision', async () => {
    const kv = await fresh();
    const r1 = await kv.put('n', b('1'));
    const r2 = await kv.update('n', b('2'), r1);
    assert.ok(r2 > r1);
    await assert.rejects(kv.update('n', b('x'), r1));
    await assert.rejects(kv.update('n', b('x'), r2 + 100));
    assert.equal(str(await kv.get('n')), '2');
    await kv.update('n', b('3'), r2);
    assert.equal(str(await kv.get('n')), '3');
  });

  it('keeps delete markers in history; purge leaves only its marker',
    async () => {
      const kv = await fresh();
      await kv.put('a', b('1'));
      await kv.put('a', b('2'));
      await kv.delete('a');
      assert.equal(await kv.get('a').then((e) => e?.operation ?? null),
        'DEL');
      assert.equal(await historyOps(kv, 'a'), 'PPD');
      await kv.put('a', b('3'));
      await kv.purge('a');
      assert.equal(await historyOps(kv, 'a'), 'U');
      for (let i = 0; i < 7; i++) {
        await kv.put('h', b(`v${i}`));
      }
      assert.equal(await historyOps(kv, 'h'), 'PPPPP');
      assert.equal(str(await kv.get('h')), 'v6');
    });

  it('lists only keys that have a value', async () => {
    const kv = await fresh();
    await kv.put('x', b('1'));
    await kv.put('y', b('1'));
    await kv.put('y', b('2'));
    await kv.put('z', b('1'));
    await kv.delete('z');
    const keys = [];
    for await (const k of await kv.keys()) {
      keys.push(k);
    }
    assert.deepEqual(keys.sort(), ['x', 'y']);
  });

  it('watches a key pattern: last values, then live updates', async () => {
    const kv = await fresh();
    await kv.put('svc.a', b('old'));
    await kv.put('svc.a', b('up'));
    await kv.put('other', b('o'));
    const w = await kv.watch({ key: 'svc.*' });
    const it = w[Symbol.asyncIterator]();
    assert.deepEqual(await nextEntries(it, 1), ['svc.a=up']);
    await kv.put('other', b('p'));
    await kv.put('svc.b', b('new'));
    await kv.delete('svc.a');
    assert.deepEqual(await nextEntries(it, 2), ['svc.b=new', 'svc.a=-']);
    w.stop();
  });

  it('watches every key of the bucket', async () => {
    const kv = await fresh();
    await kv.put('k1', b('a'));
    const w = await kv.watch();
    const it = w[Symbol.asyncIterator]();
    assert.deepEqual(await nextEntries(it, 1), ['k1=a']);
    await kv.put('k2', b('b'));
    await kv.put('k1', b('c'));
    assert.deepEqual(await nextEntries(it, 2), ['k2=b', 'k1=c']);
    w.stop();
  });

  it('destroys a bucket and its stream', async () => {
    const kv = await api.open('GONE', BUCKET_OPTS);
    await kv.put('a', b('1'));
    assert.equal((await api.streamInfo('KV_GONE')).state.messages, 1);
    assert.equal(await kv.destroy(), true);
    await assert.rejects(api.streamInfo('KV_GONE'));
    const again = await api.open('GONE', BUCKET_OPTS);
    assert.equal(await again.get('a'), null);
  });
}
