// nats.js v2 (`nats`) Key/Value and Object Store views against keeld:
// js.views.kv and js.views.os with the cases in kv_cases.mjs and
// os_cases.mjs.
import { after, before, describe } from 'node:test';
import { connect } from 'nats';
import { closeAndStop, startJetStream } from './harness.mjs';
import { kvCases } from './kv_cases.mjs';
import { osCases } from './os_cases.mjs';

describe('nats.js v2 Key/Value and Object Store on keeld', () => {
  let server;
  let nc;
  let js;
  let jsm;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connect));
  });

  after(() => closeAndStop(nc, server));

  const streamInfo = (name) => jsm.streams.info(name);
  describe('js.views.kv', () => {
    kvCases({ open: (name, opts) => js.views.kv(name, opts), streamInfo });
  });
  describe('js.views.os', () => {
    osCases({ open: (name) => js.views.os(name), streamInfo });
  });
});
