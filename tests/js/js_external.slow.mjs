// A mirror and a source whose origin is on another keeld: a 3-node
// cluster with jetstream { domain: HUB } holds the R3 origin ORIG; a
// single keeld with no stream of that name holds the mirror M and the
// source S, created with nats.js v3 (@nats-io/jetstream: `domain` for the
// mirror, `external` for the source). The second server reaches the
// cluster's $JS.HUB.API only through a relay client (relay.mjs), as a
// leaf node would carry it (docs/decisions/0039-external-origins-through-
// the-api.md). Shown: stream info's lag (from the origin's deliveries),
// active and error as nats.js v3 reads them; a lost last delivery copied
// again, a lost flow control request answered; every origin message once
// and in order with the origin's leader killed mid-feed; the origin
// removes a consumer the feed abandoned, and keeps one per feed.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as connect2 } from 'nats';
import { connect as connect3 } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { startCluster, startServer, waitFor } from './harness.mjs';
import { startRelay } from './relay.mjs';

const WAIT_MS = 30000;
const API = '$JS.HUB.API';
const enc = new TextEncoder();
const dec = new TextDecoder();

describe('mirror and source of an origin on another server',
  { skip: !process.env.KEELD }, () => {
    let dir;
    let origin; // the cluster
    let far; // the mirror's server
    let oc; // a client of the cluster
    let rc; // the relay's connection to the cluster
    let mc; // the relay's connection to the mirror's server
    let nc3; // the nats.js v3 client of the mirror's server
    let ojsm;
    let jsm3;
    let relay;
    let killed = null; // the origin node killed on purpose
    let published = 0;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'keel-js-ext-'));
      const conf = join(dir, 'hub.conf');
      writeFileSync(conf, 'jetstream { domain: HUB }\n');
      origin = await startCluster(3, 'hub', ['-c', conf]);
      far = await startServer();
      const urls = origin.nodes.map((s) => s.url);
      oc = await connect2({ servers: urls, timeout: 5000,
        reconnectTimeWait: 50, maxReconnectAttempts: -1 });
      rc = await connect2({ servers: urls, timeout: 5000,
        reconnectTimeWait: 50, maxReconnectAttempts: -1 });
      mc = await connect2({ servers: far.url, timeout: 5000 });
      nc3 = await connect3({ servers: far.url, timeout: 5000 });
      // The cluster answers once its meta group has a leader.
      await waitFor(async () => {
        ojsm = await oc.jetstreamManager({ domain: 'HUB' }).catch(() => null);
        return ojsm !== null;
      }, WAIT_MS, 'the cluster\'s JetStream');
      jsm3 = await jetstreamManager(nc3);
      relay = startRelay({ a: mc, b: rc, api: API, toApi: API });
    });

    after(async () => {
      relay?.close();
      for (const c of [nc3, mc, rc, oc]) {
        await c?.close();
      }
      // Every keeld not killed on purpose exits cleanly (ASan builds
      // exit non-zero on a finding).
      const codes = [await far?.stop()];
      for (const s of origin?.nodes ?? []) {
        const code = await s.stop();
        codes.push(s === killed ? null : code);
      }
      rmSync(dir, { recursive: true, force: true });
      assert.ok(codes.every((c) => c === 0 || c === null || c === undefined),
        `keeld exit codes ${codes}`);
    });

    // Publish to ORIG until n more are acked, each retried (bounded) with
    // its Nats-Msg-Id through a leader change. onEach(i) runs after each.
    async function publish(n, onEach = async () => {}) {
      const js = oc.jetstream({ domain: 'HUB' });
      for (let k = 0; k < n; k++) {
        const i = ++published;
        await waitFor(() => js.publish(`orig.${i % 5}`, enc.encode(`m${i}`),
          { msgID: `m${i}`, timeout: 2000 }).then(() => true, () => false),
        WAIT_MS, `m${i} acked`);
        await onEach(i);
      }
    }

    const held = async (name) => (await jsm3.streams.info(name)).state;
    async function caughtUp() {
      const o = (await ojsm.streams.info('ORIG')).state;
      const m = await held('M');
      const s = await held('S');
      return m.last_seq === o.last_seq && s.messages === o.last_seq;
    }
    const consumers = async () =>
      (await ojsm.consumers.list('ORIG').next()).length;

    it('creates them with nats.js v3 domain and external; lag as told',
      async () => {
        // Retried while the new cluster places it (503 until then).
        await waitFor(() => ojsm.streams.add({ name: 'ORIG',
          subjects: ['orig.>'], num_replicas: 3 }).then(() => true,
          () => false), WAIT_MS, 'ORIG created');
        await publish(50);
        // 5 deliveries of each feed pass, 45 are held: the lag is what
        // the origin's consumer still has past the position.
        relay.hold(5);
        await jsm3.streams.add({ name: 'M',
          mirror: { name: 'ORIG', domain: 'HUB' } });
        await jsm3.streams.add({ name: 'S', sources: [{ name: 'ORIG',
          external: { api: API, deliver: 'dlv.s' } }] });
        // Truly elsewhere: this server has no stream ORIG.
        await assert.rejects(jsm3.streams.info('ORIG'));
        await waitFor(async () => (await held('M')).messages === 5 &&
          (await held('S')).messages === 5, WAIT_MS, 'the first 5');
        let mi = await jsm3.streams.info('M');
        let si = await jsm3.streams.info('S');
        assert.equal(mi.mirror.lag, 45);
        assert.equal(si.sources[0].lag, 45);
        relay.release();
        await waitFor(caughtUp, WAIT_MS, 'M and S holding ORIG');
        mi = await jsm3.streams.info('M');
        si = await jsm3.streams.info('S');
        assert.equal(mi.config.mirror.external.api, API);
        assert.equal(si.config.sources[0].external.deliver, 'dlv.s');
        for (const f of [mi.mirror, si.sources[0]]) {
          assert.equal(f.lag, 0);
          assert.ok(f.active >= 0 && f.active < 10e9, `active ${f.active}`);
          assert.equal(f.error, undefined);
        }
        // The last delivery lost with nothing after it: the next idle
        // heartbeat's last consumer seq shows the gap, and each feed
        // starts over from its position.
        relay.lose(1);
        await publish(1);
        await waitFor(caughtUp, WAIT_MS, 'the lost delivery copied again');
        assert.equal(relay.stats.lost, 2);
        // A flow control request lost: the stalled consumer's heartbeats
        // name the reply it waits for, and each feed answers it. 20
        // messages of 64 KiB pass the 1 MiB a flow control covers.
        relay.loseFlowControl(1);
        const big = 'x'.repeat(64 * 1024);
        const js = oc.jetstream({ domain: 'HUB' });
        for (let k = 0; k < 20; k++) {
          const i = ++published;
          await js.publish(`orig.${i % 5}`, enc.encode(`m${i}${big}`),
            { msgID: `m${i}` });
        }
        await waitFor(caughtUp, WAIT_MS, 'copied past a lost flow control');
        assert.equal(relay.stats.lostFc, 2);
      });

    it('copies every message once, in order, through an origin leader kill',
      async () => {
        await publish(300, async (i) => {
          if (i === 150) {
            const leader = (await ojsm.streams.info('ORIG')).cluster.leader;
            killed = origin.nodes.find((_, k) => `n${k + 1}` === leader);
            await killed.kill();
          }
        });
        assert.ok(killed !== null);
        await waitFor(caughtUp, WAIT_MS, 'M and S holding ORIG');
        const last = (await ojsm.streams.info('ORIG')).state.last_seq;
        assert.equal(last, published);
        for (let seq = 1; seq <= last; seq++) {
          const o = await ojsm.streams.getMessage('ORIG', { seq });
          const m = await jsm3.streams.getMessage('M', { seq });
          const s = await jsm3.streams.getMessage('S', { seq });
          // The subject is the deliver subject (relay.mjs: a client
          // cannot keep it); payload and origin timestamp are the
          // origin's.
          assert.equal(dec.decode(m.data), dec.decode(o.data));
          assert.equal(m.time.getTime(), o.time.getTime());
          assert.equal(dec.decode(s.data), dec.decode(o.data));
          assert.equal(s.header.get('Nats-Stream-Source'), `ORIG ${seq}`);
        }
        // A consumer dropped on the way is deleted or reaped: one a feed.
        await waitFor(async () => await consumers() === 2, WAIT_MS,
          'one consumer on ORIG for each feed');
        assert.equal(relay.stats.overflow, 0);
      });

    it('shows the error while the origin is unreachable; resumes after',
      async () => {
        relay.close(); // as a leaf node link going down
        await waitFor(async () => {
          const mi = await jsm3.streams.info('M');
          const si = await jsm3.streams.info('S');
          return mi.mirror.error !== undefined &&
            si.sources[0].error !== undefined;
        }, WAIT_MS, 'the feeds showing an error');
        const mi = await jsm3.streams.info('M');
        assert.match(mi.mirror.error.description, /\$JS\.HUB\.API/);
        // The abandoned consumers lose their interest: the origin
        // removes them.
        await waitFor(async () => await consumers() === 0, WAIT_MS,
          'ORIG without consumers');
        await publish(10);
        relay = startRelay({ a: mc, b: rc, api: API, toApi: API });
        await waitFor(caughtUp, WAIT_MS, 'M and S caught up again');
        await waitFor(async () =>
          (await jsm3.streams.info('M')).mirror.error === undefined,
        WAIT_MS, 'the error cleared');
        await waitFor(async () => await consumers() === 2, WAIT_MS,
          'one consumer on ORIG for each feed');
      });
  });
