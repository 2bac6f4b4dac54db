// nats.js on a 3-node keeld cluster: the client learns every node from
// INFO connect_urls, and when its node is killed with -9 it reconnects to
// another one, re-sends its subscription there and keeps receiving what a
// client of a third node publishes (exactly once, in order).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect, Events, StringCodec } from 'nats';
import { startCluster, waitFor } from './harness.mjs';

const sc = StringCodec();
const WAIT_MS = 15000;
const MSGS = 100;

function hostPort(url) {
  return url.replace(/^nats:\/\//, '');
}

describe('nats.js failover on a keeld cluster', { skip: !process.env.KEELD },
  () => {
    let cluster;
    let nc;
    let pub;

    before(async () => {
      cluster = await startCluster(3, 'js3');
    });

    after(async () => {
      await nc?.close();
      await pub?.close();
      await cluster?.stop();
    });

    it('fails over to a node it learned from connect_urls', async () => {
      const [n1, , n3] = cluster.nodes;
      nc = await connect({
        servers: n1.url,
        timeout: 5000,
        reconnectTimeWait: 50,
        maxReconnectAttempts: 100,
      });
      const all = cluster.nodes.map((s) => hostPort(s.url)).sort();
      await waitFor(() => {
        const urls = nc.info.connect_urls ?? [];
        return all.every((u) => urls.includes(u));
      }, WAIT_MS, 'connect_urls naming every node');

      let reconnected = false;
      (async () => {
        for await (const s of nc.status()) {
          if (s.type === Events.Reconnect) {
            reconnected = true;
          }
        }
      })();
      const sub = nc.subscribe('fo.js');
      await nc.flush();
      pub = await connect({ servers: n3.url, timeout: 5000 });

      // Interest reaches n3 over the cluster link: probe until one arrives.
      const got = [];
      (async () => {
        for await (const m of sub) {
          got.push(sc.decode(m.data));
        }
      })();
      const probe = async (tag) => waitFor(async () => {
        pub.publish('fo.js', sc.encode(tag));
        await pub.flush();
        await new Promise((r) => setTimeout(r, 20));
        return got.includes(tag);
      }, WAIT_MS, `a probe ${tag} through n3`);
      await probe('before');

      const t0 = Date.now();
      await n1.kill();
      await waitFor(() => reconnected && !nc.isClosed(), WAIT_MS,
        'a reconnect to another node');
      const now = nc.getServer();
      assert.notEqual(now, hostPort(n1.url));
      assert.ok(all.includes(now), `reconnected to ${now}`);
      console.log(`# nats.js reconnected to ${now} ${Date.now() - t0} ms ` +
        'after kill -9 of its node');

      await probe('after');
      got.length = 0;
      for (let i = 0; i < MSGS; i++) {
        pub.publish('fo.js', sc.encode(`m${i}`));
      }
      pub.publish('fo.js', sc.encode('end'));
      await pub.flush();
      await waitFor(() => got.includes('end'), WAIT_MS, 'the end marker');
      // Messages from one publisher arrive in order over one link: by the
      // marker every earlier one (and any duplicate) has arrived.
      const data = got.filter((d) => d.startsWith('m'));
      assert.deepEqual(data, Array.from({ length: MSGS }, (_, i) => `m${i}`));
    });
  });
