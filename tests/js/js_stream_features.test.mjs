// nats.js against keeld: the stream features Key/Value and object stores
// stand on, each with nats-server's config field, error code and text:
// first_seq, discard_new_per_subject, and the max_age lower bound. With
// KEEL_TEST_NATS_SERVER the same cases run against nats-server (2.9.10
// has no first_seq: that case is skipped there).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, StringCodec } from 'nats';
import { apiError, closeAndStop, startJetStream } from './harness.mjs';

const sc = StringCodec();

describe('nats.js: stream features under KV and object stores', () => {
  let server;
  let nc;
  let jsm;
  let js;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connect));
  });

  after(() => closeAndStop(nc, server));

  it('starts a stream at first_seq and keeps it on update', async (t) => {
    if (server.name !== 'keeld') {
      t.skip('nats-server 2.9 has no first_seq');
      return;
    }
    const si = await jsm.streams.add({ name: 'FIRST', subjects: ['first'],
      first_seq: 100 });
    assert.equal(si.config.first_seq, 100);
    assert.equal(si.state.first_seq, 100);
    assert.equal(si.state.last_seq, 99);
    assert.equal((await js.publish('first', sc.encode('a'))).seq, 100);
    assert.equal((await js.publish('first', sc.encode('b'))).seq, 101);
    const err = await apiError(jsm.streams.update('FIRST',
      { ...si.config, first_seq: 200 }));
    assert.equal(err.err_code, 10052);
    assert.match(err.description, /first_seq/);
    const up = await jsm.streams.update('FIRST',
      { ...si.config, description: 'kept' });
    assert.equal(up.config.first_seq, 100);
    assert.equal(up.state.first_seq, 100);
    assert.equal((await js.publish('first', sc.encode('c'))).seq, 102);
  });

  it('refuses discard_new_per_subject without discard new or a limit',
    async () => {
      let err = await apiError(jsm.streams.add({ name: 'D1', subjects: ['d1'],
        discard_new_per_subject: true, max_msgs_per_subject: 1 }));
      assert.equal(err.err_code, 10052);
      assert.equal(err.description,
        'discard new per subject requires discard new policy to be set');
      err = await apiError(jsm.streams.add({ name: 'D2', subjects: ['d2'],
        discard: 'new', discard_new_per_subject: true }));
      assert.equal(err.err_code, 10052);
      assert.equal(err.description,
        'discard new per subject requires max msgs per subject > 0');
    });

  it('refuses a publish to a full subject, not to the others', async () => {
    const si = await jsm.streams.add({ name: 'D3', subjects: ['d3.*'],
      discard: 'new', discard_new_per_subject: true,
      max_msgs_per_subject: 2 });
    assert.equal(si.config.discard_new_per_subject, true);
    assert.equal((await js.publish('d3.a', sc.encode('1'))).seq, 1);
    assert.equal((await js.publish('d3.a', sc.encode('2'))).seq, 2);
    const err = await apiError(js.publish('d3.a', sc.encode('3')));
    assert.equal(err.err_code, 10077);
    assert.equal(err.description, 'maximum messages per subject exceeded');
    assert.equal((await js.publish('d3.b', sc.encode('4'))).seq, 3);
    const info = await jsm.streams.info('D3');
    assert.equal(info.state.messages, 3);
    // Deleting one of d3.a's messages makes room again.
    await jsm.streams.deleteMessage('D3', 1);
    assert.equal((await js.publish('d3.a', sc.encode('5'))).seq, 4);
  });

  it('refuses a max_age under 100ms', async () => {
    const err = await apiError(jsm.streams.add({ name: 'AGE', subjects: ['age'],
      max_age: 5 * 1000 * 1000 }));
    assert.equal(err.err_code, 10052);
    assert.equal(err.description, 'max age needs to be >= 100ms');
  });
});
