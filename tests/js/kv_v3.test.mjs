// nats.js v3 (@nats-io/transport-node, @nats-io/jetstream, @nats-io/kv,
// @nats-io/obj) Key/Value and Object Store against keeld, with the same
// cases as v2 (kv_cases.mjs, os_cases.mjs).
import { after, before, describe } from 'node:test';
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { Objm } from '@nats-io/obj';
import { closeAndStop, startServer } from './harness.mjs';
import { kvCases } from './kv_cases.mjs';
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
  describe('@nats-io/obj', () => {
    osCases({ open: (name) => objm.create(name), streamInfo });
  });
});
