// nats.js against keeld: options keeld does not implement are refused with
// an error naming them, Nats-TTL is refused without allow_msg_ttl
// (js_msg_ttl.test.mjs has the rest),
// instead of being accepted and ignored, and Nats-Rollup works: a Key/Value
// purge leaves only its marker, a rollup "all" leaves only itself, and the
// object store (whose meta updates roll up) keeps one meta per object.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, headers, StringCodec } from 'nats';
import { apiError, startJetStream } from './harness.mjs';

const sc = StringCodec();

describe('nats.js: options keeld does not implement, and rollups', () => {
  let server;
  let nc;
  let jsm;
  let js;
  let keeld;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connect));
    keeld = server.name === 'keeld';
  });

  after(async () => {
    if (nc) {
      await nc.close();
    }
    if (server) {
      await server.stop();
    }
  });

  it('refuses a placement it cannot honour: another cluster, tags it lacks',
    async (t) => {
      if (!keeld) {
        t.skip('nats-server 2.9.10 ignores placement outside a cluster');
        return;
      }
      const err = await apiError(jsm.streams.add({
        name: 'PLACE', subjects: ['place'],
        placement: { cluster: 'elsewhere', tags: [] },
      }));
      assert.equal(err.err_code, 10005);
      assert.match(err.description,
        /^no suitable peers for placement: cluster elsewhere is not this/);
      // This keeld has no server_tags.
      const tags = await apiError(jsm.streams.add({
        name: 'PLACE', subjects: ['place'],
        placement: { cluster: '', tags: ['ssd'] },
      }));
      assert.equal(tags.err_code, 10005);
      assert.match(tags.description,
        /^no suitable peers for placement, tags not matched \['ssd'\]/);
    });

  it('refuses Nats-TTL without allow_msg_ttl with the standard 10166', async (t) => {
    if (!keeld) {
      t.skip('nats-server 2.9 ignores Nats-TTL');
      return;
    }
    await jsm.streams.add({ name: 'TTL', subjects: ['ttl'] });
    const h = headers();
    h.set('Nats-TTL', '5s');
    const err = await apiError(js.publish('ttl', sc.encode('x'), { headers: h }));
    assert.match(String(err.description ?? err), /per-message TTL is disabled/);
    assert.equal((await jsm.streams.info('TTL')).state.messages, 0);
  });

  it('refuses Nats-Rollup on a stream without allow_rollup_hdrs', async () => {
    await jsm.streams.add({ name: 'NOROLL', subjects: ['noroll'] });
    const h = headers();
    h.set('Nats-Rollup', 'sub');
    const err = await apiError(js.publish('noroll', sc.encode('x'), { headers: h }));
    assert.match(String(err.description ?? err), /rollup not permitted/);
    assert.equal((await jsm.streams.info('NOROLL')).state.messages, 0);
  });

  it('a KV purge rolls the key up to its purge marker', async () => {
    const kv = await js.views.kv('ROLL', { history: 10 });
    await kv.put('a', sc.encode('1'));
    await kv.put('a', sc.encode('2'));
    await kv.put('b', sc.encode('kept'));
    await kv.purge('a');
    const seen = [];
    const hist = await kv.history({ key: 'a' });
    for await (const e of hist) {
      seen.push(e.operation);
    }
    assert.deepEqual(seen, ['PURGE']);
    assert.equal((await kv.get('a')).operation, 'PURGE');
    assert.equal(sc.decode((await kv.get('b')).value), 'kept');
    const si = await jsm.streams.info('KV_ROLL');
    assert.equal(si.state.messages, 2); // b and a's purge marker
    await kv.put('a', sc.encode('3'));
    assert.equal(sc.decode((await kv.get('a')).value), '3');
  });

  it('Nats-Rollup: all leaves only the rollup message', async () => {
    await jsm.streams.add({ name: 'ALL', subjects: ['all.>'], allow_rollup_hdrs: true });
    for (let i = 0; i < 3; i++) {
      await js.publish(`all.${i}`, sc.encode(`m${i}`));
    }
    const h = headers();
    h.set('Nats-Rollup', 'all');
    const pa = await js.publish('all.x', sc.encode('snapshot'), { headers: h });
    assert.equal(pa.seq, 4);
    const si = await jsm.streams.info('ALL');
    assert.equal(si.state.messages, 1);
    assert.equal(si.state.first_seq, 4);
    assert.equal(si.state.last_seq, 4);
  });

  it('a sealed stream refuses publishes, purges, deletes and unsealing', async () => {
    await jsm.streams.add({ name: 'SEAL', subjects: ['seal'] });
    await js.publish('seal', sc.encode('kept'));
    const si = await jsm.streams.update('SEAL', { subjects: ['seal'], sealed: true });
    assert.equal(si.config.sealed, true);
    const pub = await apiError(js.publish('seal', sc.encode('x')));
    assert.match(String(pub.description ?? pub), /invalid operation on sealed stream/);
    const purge = await apiError(jsm.streams.purge('SEAL'));
    assert.equal(purge.err_code, 10109);
    const del = await apiError(jsm.streams.deleteMessage('SEAL', 1));
    assert.equal(del.err_code, 10109);
    const unseal = await apiError(
      jsm.streams.update('SEAL', { subjects: ['seal'], sealed: false }));
    assert.match(unseal.description, /can not unseal/);
    assert.equal((await jsm.streams.info('SEAL')).state.messages, 1);
  });

  it('refuses a sealed create and rollups without the purge permission', async () => {
    const sealed = await apiError(
      jsm.streams.add({ name: 'SEALNEW', subjects: ['sealnew'], sealed: true }));
    assert.equal(sealed.err_code, 10052);
    assert.match(sealed.description, /for create can not be sealed/);
    const roll = await apiError(jsm.streams.add({
      name: 'ROLLDENY', subjects: ['rolldeny'], allow_rollup_hdrs: true, deny_purge: true,
    }));
    assert.equal(roll.err_code, 10052);
    assert.match(roll.description, /roll-ups require the purge permission/);
  });

  it('an object store keeps one meta message per object', async () => {
    const os = await js.views.os('OBJ');
    await os.putBlob({ name: 'x' }, new Uint8Array(100));
    await os.putBlob({ name: 'x' }, new Uint8Array(50));
    const got = await os.getBlob('x');
    assert.equal(got.length, 50);
    const si = await jsm.streams.info('OBJ_OBJ', { subjects_filter: '$O.OBJ.M.>' });
    assert.equal(Object.values(si.state.subjects ?? {}).reduce((a, b) => a + b, 0), 1);
  });
});
