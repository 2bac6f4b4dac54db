// JetStream consumer API and deliveries: create/info/names/list/delete with
// their errors, pull statuses (404, 408, 409), acks, naks, push delivery.
import { StringCodec } from 'nats';
import { waitFor } from './harness.mjs';
import { api, pub, pull } from './js_util.mjs';

const sc = StringCodec();

async function stream(ctx, n = 0, more = {}) {
  await api(ctx, `STREAM.CREATE.${ctx.uniq}`,
    { name: ctx.uniq, subjects: [`${ctx.uniq}.>`], ...more });
  for (let i = 1; i <= n; i++) {
    await pub(ctx, `${ctx.uniq}.${i % 2 ? 'odd' : 'even'}`, `m${i}`);
  }
}

function durable(ctx, name, config = {}) {
  return api(ctx, `CONSUMER.CREATE.${ctx.uniq}.${name}`, {
    stream_name: ctx.uniq,
    config: { durable_name: name, ack_policy: 'explicit', ...config },
  });
}

export const cases = [
  {
    name: 'CONSUMER.CREATE of a durable pull consumer answers its info',
    run: async (ctx) => {
      await stream(ctx, 2);
      return durable(ctx, 'd1');
    },
  },
  {
    name: 'CONSUMER.CREATE on a missing stream is 10059',
    run: (ctx) => durable(ctx, 'd1'),
  },
  {
    name: 'CONSUMER.CREATE whose durable differs from the subject is refused',
    run: async (ctx) => {
      await stream(ctx);
      return api(ctx, `CONSUMER.CREATE.${ctx.uniq}.one`, {
        stream_name: ctx.uniq, config: { durable_name: 'two' } });
    },
  },
  {
    name: 'CONSUMER.CREATE with a filter outside the stream is refused',
    run: async (ctx) => {
      await stream(ctx);
      return durable(ctx, 'f1', { filter_subject: 'elsewhere.x' });
    },
  },
  {
    name: 'CONSUMER.CREATE again with the same config succeeds',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'same');
      return durable(ctx, 'same');
    },
  },
  {
    name: 'CONSUMER.CREATE of an ephemeral consumer (legacy subject)',
    intended: { 'config.name': 'keeld fills config.name with the generated name, as nats-server 2.10 does; 2.9.10 leaves it out' },
    run: async (ctx) => {
      await stream(ctx, 1);
      const r = await api(ctx, `CONSUMER.CREATE.${ctx.uniq}`, {
        stream_name: ctx.uniq, config: { ack_policy: 'explicit' } });
      return { ...r, name: typeof r.name,
        config: { ...r.config, name: typeof r.config?.name } };
    },
  },
  {
    name: 'CONSUMER.INFO of a missing consumer is 10014',
    run: async (ctx) => {
      await stream(ctx);
      return api(ctx, `CONSUMER.INFO.${ctx.uniq}.nope`, '');
    },
  },
  {
    name: 'CONSUMER.INFO shows delivered, ack floor and pending',
    run: async (ctx) => {
      await stream(ctx, 3);
      await durable(ctx, 'p');
      const got = await pull(ctx, 'p', { batch: 2, no_wait: true }, { max: 2 });
      return { got, info: await api(ctx, `CONSUMER.INFO.${ctx.uniq}.p`, '') };
    },
  },
  {
    name: 'CONSUMER.NAMES and CONSUMER.LIST list the consumers',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'a');
      await durable(ctx, 'b');
      const names = await api(ctx, `CONSUMER.NAMES.${ctx.uniq}`, '');
      const list = await api(ctx, `CONSUMER.LIST.${ctx.uniq}`, '');
      names.consumers?.sort();
      return { names, list: { ...list,
        consumers: list.consumers?.map((c) => c.name).sort() } };
    },
  },
  {
    name: 'CONSUMER.DELETE answers success, then 10014',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'gone');
      return [await api(ctx, `CONSUMER.DELETE.${ctx.uniq}.gone`, ''),
        await api(ctx, `CONSUMER.DELETE.${ctx.uniq}.gone`, '')];
    },
  },
  {
    name: 'a pull delivers in order with the ack subject metadata',
    run: async (ctx) => {
      await stream(ctx, 4);
      await durable(ctx, 'p');
      return pull(ctx, 'p', { batch: 4, expires: 2e9 }, { max: 4 });
    },
  },
  {
    name: 'a no_wait pull with nothing pending ends with 404',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'p');
      return pull(ctx, 'p', { batch: 1, no_wait: true });
    },
  },
  {
    name: 'a pull that expires with nothing pending ends with 408',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'p');
      return pull(ctx, 'p', { batch: 1, expires: 200e6 });
    },
  },
  {
    name: 'a pull over max_batch ends with 409',
    run: async (ctx) => {
      await stream(ctx, 1);
      await durable(ctx, 'p', { max_batch: 2 });
      return pull(ctx, 'p', { batch: 5, expires: 1e9 });
    },
  },
  {
    name: 'a pull waiting when its consumer is deleted ends with 409',
    run: async (ctx) => {
      await stream(ctx);
      await durable(ctx, 'p');
      const waiting = pull(ctx, 'p', { batch: 1, expires: 2e9 });
      await ctx.nc.flush();
      await api(ctx, `CONSUMER.DELETE.${ctx.uniq}.p`, '');
      return waiting;
    },
  },
  {
    name: 'a pull on a missing consumer gets no messages',
    intended: { '': 'keeld ends a pull for a stream or consumer that does not exist with a 409 Stream/Consumer Not Found status, so the client learns why at once; nats-server does not answer and the client waits for its timeout' },
    run: (ctx) => pull(ctx, 'nope', { batch: 1, no_wait: true },
      { ms: 1000, stream: ctx.uniq }),
  },
  {
    name: 'a NAK redelivers with the delivery count raised',
    run: async (ctx) => {
      await stream(ctx, 1);
      await durable(ctx, 'p');
      const inbox = `_INBOX.${ctx.uniq}.nak`;
      const sub = ctx.nc.subscribe(inbox, { max: 2 });
      const subj = `$JS.API.CONSUMER.MSG.NEXT.${ctx.uniq}.p`;
      ctx.nc.publish(subj, sc.encode('{"batch":1}'), { reply: inbox });
      const seen = [];
      const timer = setTimeout(() => sub.unsubscribe(), 3000);
      for await (const m of sub) {
        const t = m.reply.split('.');
        seen.push([Number(t[5]), Number(t[4])]);
        if (seen.length === 1) {
          m.respond(sc.encode('-NAK'));
          ctx.nc.publish(subj, sc.encode('{"batch":1}'), { reply: inbox });
        } else {
          m.respond(sc.encode('+ACK'));
        }
      }
      clearTimeout(timer);
      return seen;
    },
  },
  {
    name: 'acked messages are not delivered again',
    run: async (ctx) => {
      await stream(ctx, 2);
      await durable(ctx, 'p');
      const inbox = `_INBOX.${ctx.uniq}.ack`;
      const sub = ctx.nc.subscribe(inbox, { max: 2 });
      ctx.nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${ctx.uniq}.p`,
        sc.encode('{"batch":2}'), { reply: inbox });
      for await (const m of sub) {
        await m.respond(sc.encode('+ACK'));
      }
      await ctx.nc.flush();
      // keeld applies acks through the stream's Raft group, so the ack
      // floor may move a moment after the flush: wait for it (bounded).
      let info = null;
      await waitFor(async () => {
        info = await api(ctx, `CONSUMER.INFO.${ctx.uniq}.p`, '');
        return info.ack_floor?.stream_seq === 2;
      }, 3000, 'the ack floor reaching 2').catch(() => {});
      const again = await pull(ctx, 'p', { batch: 2, no_wait: true });
      return { again, ack_floor: info.ack_floor?.stream_seq,
        pending: info.num_ack_pending };
    },
  },
  {
    name: 'a filtered consumer delivers only its subject',
    known: { '': 'a no_wait pull that delivered some messages ends with 408 Request Timeout on nats-server 2.9.10 and 404 No Messages on keeld; nats.js and nats.c end the batch on either' },
    run: async (ctx) => {
      await stream(ctx, 4);
      await durable(ctx, 'ev', { filter_subject: `${ctx.uniq}.even` });
      return pull(ctx, 'ev', { batch: 4, no_wait: true });
    },
  },
  {
    name: 'deliver_policy last starts at the last message',
    known: { '': 'a no_wait pull that delivered some messages ends with 408 Request Timeout on nats-server 2.9.10 and 404 No Messages on keeld; nats.js and nats.c end the batch on either' },
    run: async (ctx) => {
      await stream(ctx, 3);
      await durable(ctx, 'l', { deliver_policy: 'last' });
      return pull(ctx, 'l', { batch: 3, no_wait: true });
    },
  },
  {
    name: 'deliver_policy by_start_sequence starts there',
    known: { '': 'a no_wait pull that delivered some messages ends with 408 Request Timeout on nats-server 2.9.10 and 404 No Messages on keeld; nats.js and nats.c end the batch on either' },
    run: async (ctx) => {
      await stream(ctx, 4);
      await durable(ctx, 's', { deliver_policy: 'by_start_sequence',
        opt_start_seq: 3 });
      return pull(ctx, 's', { batch: 4, no_wait: true });
    },
  },
  {
    name: 'a push consumer delivers to its deliver subject',
    run: async (ctx) => {
      await stream(ctx, 3);
      const deliver = `${ctx.uniq}push.out`;
      const sub = ctx.nc.subscribe(deliver, { max: 3 });
      await ctx.nc.flush();
      await durable(ctx, 'push', { deliver_subject: deliver,
        ack_policy: 'none' });
      const got = [];
      const timer = setTimeout(() => sub.unsubscribe(), 3000);
      for await (const m of sub) {
        got.push([m.subject, sc.decode(m.data),
          Number(m.reply.split('.')[5])]);
      }
      clearTimeout(timer);
      return got.map(([s, d, q]) => [s.slice(ctx.uniq.length), d, q]);
    },
  },
  {
    name: 'a workqueue stream refuses a second consumer on the same subjects',
    run: async (ctx) => {
      await stream(ctx, 0, { retention: 'workqueue' });
      await durable(ctx, 'w1');
      return durable(ctx, 'w2');
    },
  },
  {
    name: 'a workqueue stream refuses overlapping filters, then an unfiltered one',
    run: async (ctx) => {
      await stream(ctx, 0, { retention: 'workqueue' });
      return [await durable(ctx, 'f1', { filter_subject: `${ctx.uniq}.a.>` }),
        await durable(ctx, 'f2', { filter_subject: `${ctx.uniq}.a.b` }),
        await durable(ctx, 'f3', { filter_subject: `${ctx.uniq}.c` }),
        await durable(ctx, 'u1')].map((r) => r.error ?? 'created');
    },
  },
  {
    name: 'a workqueue pull consumer without acks is 10084',
    run: async (ctx) => {
      await stream(ctx, 0, { retention: 'workqueue' });
      return durable(ctx, 'n', { ack_policy: 'none' });
    },
  },
];
