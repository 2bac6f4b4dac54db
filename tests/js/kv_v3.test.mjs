// nats.js v3 (@nats-io/transport-node, @nats-io/jetstream, @nats-io/kv,
// @nats-io/obj) Key/Value and Object Store against keeld, with the same
// cases as v2 (kv_cases.mjs, os_cases.mjs).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import { closeAndStop, startServer, waitFor } from './harness.mjs';
import { b, kvCases, str } from './kv_cases.mjs';
import { osCases } from './os_cases.mjs';

describe('nats.js v3 Key/Value and Object Store on keeld', () => {
  let server;
  let nc;
  let jsm;
  let kvm;
  let objm;

  before(async () => {
    server = await startServer();
    nc = await connect({ servers: server.url, timeout: 5000 });
    jsm = await jetstreamManager(nc);
    kvm = new Kvm(nc);
    objm = new Objm(nc);
  });

  after(() => closeAndStop(nc, server));

  const streamInfo = (name) => jsm.streams.info(name);
  describe('@nats-io/kv', () => {
    kvCases({ open: (name, opts) => kvm.create(name, opts), streamInfo });
  });
  // kvm.create with `mirror` makes KV_<name> a mirror with mirror_direct
  // (docs/decisions/0036-followers-answer-direct-gets-while-current.md).
  // As on nats-server 2.9.10: the mirror answers the origin's direct gets
  // (here once the origin is gone), and the v3 client reading the mirror
  // bucket itself asks for its own bucket's subjects, which a mirror of
  // another bucket does not hold.
  it('a mirror bucket (mirror_direct) answers the origin bucket\'s gets',
    async () => {
      const origin = await kvm.create('MDO', { history: 1 });
      await origin.put('k', b('v1'));
      const mirror = await kvm.create('MDM', { mirror: { name: 'MDO' } });
      const si = await jsm.streams.info('KV_MDM');
      assert.equal(si.config.mirror_direct, true);
      await waitFor(async () =>
        (await jsm.streams.info('KV_MDM')).state.last_seq === 1, 5000,
      'the mirror has the origin\'s message');
      assert.equal(await mirror.get('k'), null);
      await jsm.streams.delete('KV_MDO');
      assert.equal(str(await origin.get('k')), 'v1');
    });
  describe('@nats-io/obj', () => {
    osCases({ open: (name) => objm.create(name), streamInfo });
  });
});
