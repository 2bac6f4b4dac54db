// nats.js v3 (@nats-io/jetstream) batched and multi-subject direct gets
// against keeld (nats-server 2.11's DIRECT.GET batch, multi_last,
// up_to_seq, up_to_time, max_bytes): jsm.direct.getBatch and
// getLastMessagesFor read every message with its pending count, and the
// EOB status ends the iterator. keeld advertises 2.10.24, below the 2.11
// these calls are gated on in nats.js, so the test lifts that gate on its
// connection (docs/jetstream-config.md, "Direct get"). nats-server 2.9.10
// has no batches: skipped there.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { closeAndStop, startServer } from './harness.mjs';

async function collect(iter) {
  const out = [];
  for await (const m of iter) {
    out.push([m.seq, m.subject, m.pending, m.string()]);
  }
  return out;
}

describe('nats.js v3: batched and multi-subject direct gets', () => {
  let server;
  let nc;
  let jsm;

  before(async () => {
    server = await startServer();
    nc = await connect({ servers: server.url, timeout: 5000 });
    nc.features.set('js_batch_direct_get', '2.10.0');
    jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'DB', subjects: ['db.>'],
      allow_direct: true });
    const js = jetstream(nc);
    for (const [s, d] of [['db.a', '1'], ['db.b', '2'], ['db.a', '3'],
      ['db.c.x', '4'], ['db.b', '5']]) {
      await js.publish(s, d);
    }
  });

  after(() => closeAndStop(nc, server));

  it('getBatch reads from a seq with the pending count', async (t) => {
    if (server.name !== 'keeld') {
      t.skip('nats-server 2.9 has no batched direct get');
      return;
    }
    const got = await collect(await jsm.direct.getBatch('DB',
      { seq: 2, batch: 3 }));
    assert.deepEqual(got, [[2, 'db.b', 3, '2'], [3, 'db.a', 2, '3'],
      [4, 'db.c.x', 1, '4']]);
    const next = await collect(await jsm.direct.getBatch('DB',
      { seq: 1, next_by_subj: 'db.b' }));
    assert.deepEqual(next, [[2, 'db.b', 1, '2'], [5, 'db.b', 0, '5']]);
    const small = await collect(await jsm.direct.getBatch('DB',
      { seq: 1, batch: 5, max_bytes: 5 }));
    assert.deepEqual(small, [[1, 'db.a', 4, '1']]);
    const since = await collect(await jsm.direct.getBatch('DB',
      { start_time: new Date(0), batch: 2 }));
    assert.deepEqual(since.map((m) => m[0]), [1, 2]);
  });

  it('getLastMessagesFor reads the last of each subject', async (t) => {
    if (server.name !== 'keeld') {
      t.skip('nats-server 2.9 has no multi_last');
      return;
    }
    const all = await collect(await jsm.direct.getLastMessagesFor('DB',
      { multi_last: ['db.>'] }));
    assert.deepEqual(all, [[3, 'db.a', 2, '3'], [4, 'db.c.x', 1, '4'],
      [5, 'db.b', 0, '5']]);
    const upTo = await collect(await jsm.direct.getLastMessagesFor('DB',
      { multi_last: ['db.a', 'db.b'], up_to_seq: 2 }));
    assert.deepEqual(upTo, [[1, 'db.a', 1, '1'], [2, 'db.b', 0, '2']]);
    const future = await collect(await jsm.direct.getLastMessagesFor('DB',
      { multi_last: ['db.*'], up_to_time: new Date(Date.now() + 60000) }));
    assert.deepEqual(future.map((m) => m[0]), [3, 5]);
    const none = await collect(await jsm.direct.getLastMessagesFor('DB',
      { multi_last: ['nothing.here'] }));
    assert.deepEqual(none, []);
  });
});
