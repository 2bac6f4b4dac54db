// nats.js v3 against keeld: per-message TTL and subject delete markers as
// nats-server 2.11 defines them (docs/decisions/0034-per-message-ttl-in-
// the-state-machine.md): a publish's ttl option, a bucket's markerTTL,
// kv.create(key, value, ttl), kv.purge(key, { ttl }), and the watcher
// seeing the marker as a purge. nats-server 2.9.10 knows none of it
// (docs/compat.md): the cases run against keeld only.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { apiError, closeAndStop, startServer, waitFor } from './harness.mjs';

const EXPIRE_MS = 15000; // TTLs of 1-2 s, expired on the leader's 1 s tick
const te = new TextEncoder();

describe('nats.js v3: per-message TTL and delete markers', () => {
  let server;
  let nc;
  let jsm;
  let js;
  let kvm;

  before(async () => {
    server = await startServer();
    nc = await connect({ servers: server.url, timeout: 5000 });
    jsm = await jetstreamManager(nc);
    js = jetstream(nc);
    kvm = new Kvm(nc);
  });

  after(() => closeAndStop(nc, server));

  const keeldOnly = (t) => {
    if (server.name !== 'keeld') {
      t.skip('nats-server 2.9 has no per-message TTL');
      return false;
    }
    return true;
  };

  it('expires a publish by its ttl option and refuses bad ones', async (t) => {
    if (!keeldOnly(t)) {
      return;
    }
    await jsm.streams.add({ name: 'PT', subjects: ['pt.>'], allow_msg_ttl: true });
    const a = await js.publish('pt.a', te.encode('x'), { ttl: '1s' });
    await js.publish('pt.b', te.encode('y'));
    assert.equal(a.seq, 1);
    let err = await apiError(js.publish('pt.c', te.encode('z'), { ttl: '10ms' }));
    assert.equal(err.err_code, 10165);
    assert.equal(err.description, 'invalid per-message TTL');
    await jsm.streams.add({ name: 'PN', subjects: ['pn'] });
    err = await apiError(js.publish('pn', te.encode('z'), { ttl: '5s' }));
    assert.equal(err.err_code, 10166);
    await waitFor(async () => (await jsm.streams.info('PT')).state.messages === 1,
      EXPIRE_MS, 'pt.a expires');
    const left = await jsm.streams.getMessage('PT', { last_by_subj: 'pt.b' });
    assert.equal(left.seq, 2);
    err = await apiError(jsm.streams.update('PT', { subjects: ['pt.>'], allow_msg_ttl: false }));
    assert.equal(err.err_code, 10052);
    assert.equal(err.description, 'message TTL status can not be disabled');
  });

  it('kv.create with a ttl leaves a marker the watcher sees as a purge',
    async (t) => {
      if (!keeldOnly(t)) {
        return;
      }
      const kv = await kvm.create('TTLKV', { markerTTL: 1000, history: 5 });
      const si = await jsm.streams.info('KV_TTLKV');
      assert.equal(si.config.allow_msg_ttl, true);
      assert.equal(si.config.subject_delete_marker_ttl, 1000 * 1e6);
      assert.equal(await kv.create('k', te.encode('v'), '1s'), 1);
      await kv.put('stay', te.encode('s'));
      const ops = [];
      const w = await kv.watch({ key: 'k' }); // its value, then changes
      const seen = (async () => {
        for await (const e of w) {
          ops.push(e.operation);
          if (e.operation === 'PURGE') {
            break;
          }
        }
      })();
      await waitFor(async () => (await kv.get('k'))?.operation === 'PURGE',
        EXPIRE_MS, 'k expires to a marker');
      await seen;
      assert.deepEqual(ops, ['PUT', 'PURGE']);
      const m = await jsm.streams.getMessage('KV_TTLKV', { last_by_subj: '$KV.TTLKV.k' });
      assert.equal(m.header.get('Nats-Marker-Reason'), 'MaxAge');
      assert.equal(m.header.get('Nats-TTL'), '1s');
      // The marker expires too; then the key is gone and may be created.
      await waitFor(async () => (await kv.get('k')) === null, EXPIRE_MS,
        'the marker expires');
      assert.equal((await kv.get('stay'))?.string(), 's');
      assert.ok((await kv.create('k', te.encode('again'))) > 0);
    });

  it('kv.purge with a ttl removes the purge marker itself later',
    async (t) => {
      if (!keeldOnly(t)) {
        return;
      }
      const kv = await kvm.create('PURGETTL', { markerTTL: 1000 });
      await kv.put('p', te.encode('1'));
      await kv.purge('p', { ttl: '1s' });
      assert.equal((await kv.get('p'))?.operation, 'PURGE');
      // A KV purge is a marker already: its expiry leaves nothing.
      await waitFor(async () =>
        (await jsm.streams.info('KV_PURGETTL')).state.messages === 0,
      EXPIRE_MS, 'the purge marker expires');
      assert.equal(await kv.get('p'), null);
    });
});
