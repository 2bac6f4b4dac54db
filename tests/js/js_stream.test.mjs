// nats.js JetStream streams against keeld: jsm.streams add/info/update/
// purge/delete, js.publish with acks, dedupe by msgID, expected last
// sequence, and the API errors clients switch on.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, StringCodec } from 'nats';
import { closeAndStop, startJetStream } from './harness.mjs';

const sc = StringCodec();

describe('nats.js JetStream streams on keeld', () => {
  let server;
  let nc;
  let jsm;
  let js;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connect));
  });

  after(() => closeAndStop(nc, server));

  it('adds a stream and reports it in info and names', async () => {
    const si = await jsm.streams.add({ name: 'ORDERS', subjects: ['orders.>'] });
    assert.equal(si.config.name, 'ORDERS');
    assert.deepEqual(si.config.subjects, ['orders.>']);
    assert.equal(si.state.messages, 0);
    const info = await jsm.streams.info('ORDERS');
    assert.equal(info.config.retention, 'limits');
    const names = await jsm.streams.names().next();
    assert.ok(names.includes('ORDERS'));
    const found = await jsm.streams.find('orders.new');
    assert.equal(found, 'ORDERS');
  });

  it('acks publishes with consecutive sequences', async () => {
    for (let i = 1; i <= 5; i++) {
      const pa = await js.publish('orders.new', sc.encode(`o${i}`));
      assert.equal(pa.stream, 'ORDERS');
      assert.equal(pa.seq, i);
      assert.equal(pa.duplicate, false);
    }
    const info = await jsm.streams.info('ORDERS');
    assert.equal(info.state.messages, 5);
    assert.equal(info.state.last_seq, 5);
    const m = await jsm.streams.getMessage('ORDERS', { seq: 3 });
    assert.equal(m.subject, 'orders.new');
    assert.equal(sc.decode(m.data), 'o3');
  });

  it('acks a repeated msgID as a duplicate of the first', async () => {
    const a = await js.publish('orders.dedupe', sc.encode('x'), { msgID: 'm-1' });
    const b = await js.publish('orders.dedupe', sc.encode('x'), { msgID: 'm-1' });
    assert.equal(b.seq, a.seq);
    assert.equal(b.duplicate, true);
  });

  it('refuses a wrong expected last sequence with 10071', async () => {
    await assert.rejects(
      js.publish('orders.new', sc.encode('late'), { expect: { lastSequence: 1 } }),
      (err) => /wrong last sequence/.test(err.message),
    );
  });

  it('updates limits, purges and deletes the stream', async () => {
    const up = await jsm.streams.update('ORDERS', { subjects: ['orders.>'], max_msgs: 2 });
    assert.equal(up.config.max_msgs, 2);
    assert.equal(up.state.messages, 2);
    const pr = await jsm.streams.purge('ORDERS');
    assert.equal(pr.success, true);
    assert.equal(pr.purged, 2);
    assert.equal(await jsm.streams.delete('ORDERS'), true);
    await assert.rejects(jsm.streams.info('ORDERS'), /stream not found/);
  });

  it('refuses overlapping subjects', async () => {
    await jsm.streams.add({ name: 'A', subjects: ['a.>'] });
    await assert.rejects(
      jsm.streams.add({ name: 'B', subjects: ['a.b'] }),
      /subjects overlap/,
    );
  });
});
