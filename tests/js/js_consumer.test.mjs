// nats.js against keeld: JetStream consumers (consumers.get(...).fetch and
// consume with acks, an ordered consumer, a push consumer through the old
// subscribe API, replay_policy original).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { AckPolicy, connect, consumerOpts, ReplayPolicy, StringCodec } from 'nats';
import { startJetStream, waitFor } from './harness.mjs';

const sc = StringCodec();
const WAIT_MS = 5000;

describe('nats.js consumers on keeld', () => {
  let server;
  let nc;
  let jsm;
  let js;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connect));
  });

  after(async () => {
    if (nc) {
      await nc.close();
    }
    if (server) {
      await server.stop();
    }
  });

  async function stream(name, n) {
    await jsm.streams.add({ name, subjects: [`${name}.>`] });
    for (let i = 1; i <= n; i++) {
      const pa = await js.publish(`${name}.a`, sc.encode(`m${i}`));
      assert.equal(pa.seq, i);
    }
  }
  it('a pull for a consumer that does not exist ends with a 409 status', async () => {
    await stream('NOSUCH', 0);
    const m = await nc.request('$JS.API.CONSUMER.MSG.NEXT.NOSUCH.none',
      sc.encode('{"batch":1,"no_wait":true}'), { timeout: WAIT_MS });
    // A status, not a JSON body that fetch() would yield as a message.
    assert.equal(m.data.length, 0);
    assert.equal(m.headers?.code, 409);
    assert.equal(m.headers?.description, 'Consumer Not Found');
  });


  it('fetches a batch and acks it, moving the ack floor', async () => {
    await stream('FETCH', 10);
    await jsm.consumers.add('FETCH', {
      durable_name: 'D', ack_policy: AckPolicy.Explicit,
    });
    const c = await js.consumers.get('FETCH', 'D');
    const seqs = [];
    const iter = await c.fetch({ max_messages: 5, expires: WAIT_MS });
    for await (const m of iter) {
      seqs.push(m.seq);
      assert.equal(m.subject, 'FETCH.a');
      assert.equal(sc.decode(m.data), `m${m.seq}`);
      await m.ackAck();
    }
    assert.deepEqual(seqs, [1, 2, 3, 4, 5]);
    const ci = await jsm.consumers.info('FETCH', 'D');
    assert.equal(ci.ack_floor.stream_seq, 5);
    assert.equal(ci.num_pending, 5);
    assert.equal(ci.num_ack_pending, 0);
    assert.equal(ci.config.deliver_subject, undefined);
  });

  it('consumes continuously with acks until the last message', async () => {
    await stream('CONSUME', 30);
    await jsm.consumers.add('CONSUME', {
      durable_name: 'C', ack_policy: AckPolicy.Explicit,
    });
    const c = await js.consumers.get('CONSUME', 'C');
    const msgs = await c.consume({ max_messages: 7, expires: WAIT_MS });
    let next = 1;
    for await (const m of msgs) {
      assert.equal(m.seq, next);
      m.ack();
      next++;
      if (m.seq === 30) {
        break;
      }
    }
    assert.equal(next, 31);
  });

  it('reads every message in order through an ordered consumer', async () => {
    await stream('ORDERED', 20);
    const c = await js.consumers.get('ORDERED');
    const iter = await c.fetch({ max_messages: 20, expires: WAIT_MS });
    let next = 1;
    for await (const m of iter) {
      assert.equal(m.seq, next);
      next++;
    }
    assert.equal(next, 21);
  });

  it('delivers to a push subscription and takes its acks', async () => {
    await stream('PUSHJS', 5);
    const opts = consumerOpts();
    opts.durable('P');
    opts.manualAck();
    opts.ackExplicit();
    opts.deliverTo('push.inbox.P');
    const sub = await js.subscribe('PUSHJS.a', opts);
    let next = 1;
    for await (const m of sub) {
      assert.equal(m.seq, next);
      m.ack();
      if (next === 5) {
        break;
      }
      next++;
    }
    const ci = await jsm.consumers.info('PUSHJS', 'P');
    assert.equal(ci.delivered.stream_seq, 5);
  });

  it('replays with the original spacing under replay_policy original', async () => {
    await jsm.streams.add({ name: 'REPLAYJS', subjects: ['REPLAYJS.>'] });
    for (let i = 0; i < 2; i++) {
      const t0 = Date.now();
      await js.publish('REPLAYJS.a', sc.encode(`m${i}`));
      if (i === 0) {
        await waitFor(async () => Date.now() - t0 >= 400, WAIT_MS, 'a 400 ms gap');
      }
    }
    await jsm.consumers.add('REPLAYJS', { durable_name: 'orig',
      ack_policy: AckPolicy.None, replay_policy: ReplayPolicy.Original });
    const c = await js.consumers.get('REPLAYJS', 'orig');
    const at = [];
    for await (const m of await c.fetch({ max_messages: 2, expires: WAIT_MS })) {
      at.push(Date.now());
      if (m.seq === 2) {
        break;
      }
    }
    assert.equal(at.length, 2);
    assert.ok(at[1] - at[0] >= 350, `gap ${at[1] - at[0]} ms`);
  });
});
