// nats.js v2 and v3 against keeld: a stream with `sources`
// (docs/decisions/0035-sources-share-the-mirror-pump.md) created through
// jsm.streams.add, read back as the clients read it: each origin message
// once under the stream's own seqs with the Nats-Stream-Source header,
// and stream info's `sources` [{name, lag, active, error?}] as
// StreamSourceInfo; a mirror promoted by an update that removes
// `mirror`; a source with `subject_transforms` (nats-server 2.10,
// docs/decisions/0037-mirror-and-source-transforms-in-the-log.md). With
// KEEL_TEST_NATS_SERVER the same cases run against nats-server 2.9.10,
// but for the promotion and the transforms.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect as connectV2, StringCodec } from 'nats';
import { connect as connectV3 } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { apiError, closeAndStop, startJetStream, waitFor } from './harness.mjs';

const WAIT_MS = 10000;
const sc = StringCodec();

describe('nats.js: sources', () => {
  let server;
  let nc;
  let jsm;
  let js;

  before(async () => {
    ({ server, nc, jsm, js } = await startJetStream(connectV2));
  });

  after(() => closeAndStop(nc, server));

  it('v2: sources two origins, one filtered, and reports them', async () => {
    await jsm.streams.add({ name: 'SA', subjects: ['sa.>'] });
    await jsm.streams.add({ name: 'SB', subjects: ['sb.>'] });
    for (let i = 1; i <= 4; i++) {
      await js.publish(i % 2 ? 'sa.x' : 'sa.y', sc.encode(`a${i}`));
      await js.publish('sb.z', sc.encode(`b${i}`));
    }
    const si = await jsm.streams.add({ name: 'SAGG', subjects: ['sagg'],
      sources: [{ name: 'SA', filter_subject: 'sa.x' }, { name: 'SB' }] });
    assert.deepEqual(si.config.sources.map((s) => s.name), ['SA', 'SB']);
    assert.equal(si.config.sources[0].filter_subject, 'sa.x');
    await waitFor(async () => (await jsm.streams.info('SAGG')).state.messages === 6,
      WAIT_MS, 'SAGG holds 2 + 4 messages');
    const info = await jsm.streams.info('SAGG');
    assert.equal(info.state.first_seq, 1);
    assert.equal(info.state.last_seq, 6);
    const byName = Object.fromEntries(info.sources.map((s) => [s.name, s]));
    assert.deepEqual(Object.keys(byName).sort(), ['SA', 'SB']);
    for (const s of info.sources) {
      assert.equal(typeof s.lag, 'number');
      assert.equal(typeof s.active, 'number');
      assert.ok(s.active >= 0, `${s.name} was read`);
      assert.equal(s.error, undefined);
    }
    assert.equal(byName.SB.lag, 0);
    // Each message once, with its origin and origin seq in the header.
    const seen = new Set();
    for (let seq = 1; seq <= 6; seq++) {
      const m = await jsm.streams.getMessage('SAGG', { seq });
      assert.equal(m.seq, seq);
      const src = m.header.get('Nats-Stream-Source');
      assert.match(src, /^(SA|SB) \d+$/);
      assert.ok(!seen.has(src), `${src} twice`);
      seen.add(src);
      const [name, oseq] = src.split(' ');
      const o = await jsm.streams.getMessage(name, { seq: Number(oseq) });
      assert.equal(m.subject, o.subject);
      assert.equal(sc.decode(m.data), sc.decode(o.data));
    }
    assert.ok(!seen.has('SA 2') && !seen.has('SA 4'), 'the filter holds');
    // A publish to its own subject takes the next seq.
    assert.equal((await js.publish('sagg', sc.encode('own'))).seq, 7);
  });

  it('v3: creates a sourced stream and reads its sources info', async () => {
    const nc3 = await connectV3({ servers: server.url, timeout: 5000 });
    try {
      const jsm3 = await jetstreamManager(nc3);
      await jsm3.streams.add({ name: 'S3O', subjects: ['s3o'] });
      await nc3.request('s3o', 'one');
      const si = await jsm3.streams.add({ name: 'S3',
        sources: [{ name: 'S3O' }] });
      assert.equal(si.config.sources[0].name, 'S3O');
      await waitFor(async () => (await jsm3.streams.info('S3')).state.messages === 1,
        WAIT_MS, 'S3 holds the origin message');
      const info = await jsm3.streams.info('S3');
      assert.equal(info.sources.length, 1);
      assert.equal(info.sources[0].name, 'S3O');
      assert.equal(info.sources[0].lag, 0);
      const err = await apiError(jsm3.streams.add({ name: 'S3M',
        mirror: { name: 'S3O' }, sources: [{ name: 'S3O' }] }));
      assert.equal(err.err_code, 10031);
    } finally {
      await nc3.close();
    }
  });

  it('v3: an update that removes mirror promotes the mirror',
    { skip: process.env.KEEL_TEST_NATS_SERVER && 'nats-server 2.9.10 refuses it' },
    async () => {
    const nc3 = await connectV3({ servers: server.url, timeout: 5000 });
    try {
      const jsm3 = await jetstreamManager(nc3);
      await jsm3.streams.add({ name: 'PO', subjects: ['po.>'] });
      await nc3.request('po.a', 'one');
      await nc3.request('po.b', 'two');
      await jsm3.streams.add({ name: 'PM', mirror: { name: 'PO' } });
      await waitFor(async () => (await jsm3.streams.info('PM')).state.messages === 2,
        WAIT_MS, 'PM mirrors both');
      // nats.js sends the old config with mirror left out (2.12's way).
      const si = await jsm3.streams.update('PM', { mirror: undefined,
        subjects: ['pm'] });
      assert.equal(si.config.mirror, undefined);
      assert.deepEqual(si.config.subjects, ['pm']);
      const js3 = jsm3.jetstream();
      assert.equal((await js3.publish('pm', 'own')).seq, 3);
      const m = await jsm3.streams.getMessage('PM', { seq: 1 });
      assert.equal(m.subject, 'po.a');
      assert.equal((await jsm3.streams.info('PM')).mirror, undefined);
    } finally {
      await nc3.close();
    }
  });

  it('v3: sources with subject_transforms store transformed subjects',
    { skip: process.env.KEEL_TEST_NATS_SERVER
      ? 'nats-server 2.9.10 ignores subject_transforms' : false },
    async () => {
      const nc3 = await connectV3({ servers: server.url, timeout: 5000 });
      try {
        const jsm3 = await jetstreamManager(nc3);
        await jsm3.streams.add({ name: 'T3O', subjects: ['t3o.*'] });
        for (const s of ['t3o.a', 't3o.b', 't3o.a']) {
          await nc3.request(s, s);
        }
        const transforms = [{ src: 't3o.a', dest: 'got.a' }];
        const si = await jsm3.streams.add({ name: 'T3',
          sources: [{ name: 'T3O', subject_transforms: transforms }] });
        assert.deepEqual(si.config.sources[0].subject_transforms, transforms);
        await waitFor(async () => (await jsm3.streams.info('T3')).state.messages === 2,
          WAIT_MS, 'T3 holds the two t3o.a messages');
        const info = await jsm3.streams.info('T3');
        assert.deepEqual(info.sources[0].subject_transforms, transforms);
        for (const [seq, oseq] of [[1, 1], [2, 3]]) {
          const m = await jsm3.streams.getMessage('T3', { seq });
          assert.equal(m.subject, 'got.a');
          assert.equal(m.header.get('Nats-Stream-Source'), `T3O ${oseq}`);
        }
        const err = await apiError(jsm3.streams.add({ name: 'T3F',
          sources: [{ name: 'T3O', filter_subject: 't3o.b',
            subject_transforms: transforms }] }));
        assert.equal(err.err_code, 10144);
      } finally {
        await nc3.close();
      }
    });
});
