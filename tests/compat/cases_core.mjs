// Core NATS protocol: INFO, CONNECT, PING/PONG, limits, -ERR texts,
// subjects, headers, queue groups, wildcards, UNSUB max, no responders.
import { headers, StringCodec } from 'nats';
import { rawSession } from './harness.mjs';

const sc = StringCodec();

const SILENT = 'nats-server closes the connection without saying why; ' +
  'keeld sends -ERR \'Unknown Protocol Operation\' first, so the client ' +
  'can log a reason';

// What a raw session shows a client: the lines after INFO and whether the
// server closed the connection.
async function raw(ctx, send, opts) {
  const r = await rawSession(ctx.url, send, opts);
  return { lines: r.lines, closed: r.closed };
}

// Messages a subscription got within ms, as [subject, data] pairs.
async function drain(sub, max, ms = 2000) {
  const got = [];
  const timer = setTimeout(() => sub.unsubscribe(), ms);
  for await (const m of sub) {
    got.push([m.subject, sc.decode(m.data)]);
    if (got.length >= max) {
      break;
    }
  }
  clearTimeout(timer);
  return got;
}

export const cases = [
  {
    name: 'INFO carries the fields clients read, with their types',
    run: async (ctx) => {
      const { info } = await rawSession(ctx.url, 'PING\r\n');
      return {
        keys: ['server_id', 'version', 'proto', 'headers', 'max_payload',
          'jetstream', 'host', 'port', 'client_id']
          .map((k) => [k, typeof info[k]]),
        proto: info.proto,
        headers: info.headers,
        max_payload: info.max_payload,
        jetstream: info.jetstream,
        auth_required: info.auth_required ?? false,
        tls_required: info.tls_required ?? false,
        semver: /^\d+\.\d+\.\d+/.test(info.version),
      };
    },
  },
  {
    name: 'CONNECT {} without verbose and pedantic takes their defaults',
    known: { lines: 'nats-server defaults verbose (and pedantic) to true when CONNECT omits them; keeld defaults them to false. Every client library sends both, so only hand-typed sessions see it' },
    run: (ctx) => raw(ctx, 'CONNECT {}\r\nSUB d.x 1\r\nPING\r\n',
      { connect: null }),
  },
  {
    name: 'CONNECT then PING is answered with PONG',
    run: (ctx) => raw(ctx, 'PING\r\n'),
  },
  {
    name: 'verbose CONNECT gets +OK for CONNECT, SUB and PUB',
    run: (ctx) => raw(ctx, 'SUB v.a 1\r\nPUB v.b 0\r\n\r\nPING\r\n',
      { connect: { verbose: true } }),
  },
  {
    name: 'pipelined PINGs each get a PONG, in order',
    run: (ctx) => raw(ctx, 'PING\r\nPING\r\nPING\r\n', { pongs: 3 }),
  },
  {
    name: 'PING before CONNECT is answered',
    run: (ctx) => raw(ctx, 'PING\r\n', { connect: null }),
  },
  {
    name: 'protocol verbs are case-insensitive and split on tabs',
    run: (ctx) => raw(ctx, 'sub\tlc.x\t7\r\npub lc.x 2\r\nhi\r\nping\r\n'),
  },
  {
    name: 'an unknown protocol operation is an -ERR and a close',
    run: (ctx) => raw(ctx, 'FOO bar\r\n', { pongs: 0 }),
  },
  {
    name: 'a CONNECT that is not JSON is refused',
    intended: { lines: SILENT },
    run: (ctx) => raw(ctx, 'CONNECT {nope\r\nPING\r\n',
      { connect: null, pongs: 0 }),
  },
  {
    name: 'CONNECT with an unknown protocol version is refused',
    run: (ctx) => raw(ctx, 'PING\r\n', { connect: { protocol: 7 }, pongs: 0 }),
  },
  {
    name: 'no_responders without headers is refused',
    run: (ctx) => raw(ctx, 'PING\r\n',
      { connect: { no_responders: true, headers: false }, pongs: 0 }),
  },
  {
    name: 'a PUB over max_payload is a Maximum Payload Violation',
    run: async (ctx) => {
      const { info } = await rawSession(ctx.url, 'PING\r\n');
      const n = info.max_payload + 1;
      // Both servers refuse at the control line. The payload is not sent:
      // a server that closes with it unread makes the kernel send RST,
      // which can drop the -ERR before the client reads it, so the case
      // would compare timing, not behaviour (keeld's linger after an -ERR
      // is shown by a nats.js test in tests/js).
      return raw(ctx, `PUB big ${n}\r\n`, { pongs: 0 });
    },
  },
  {
    name: 'a PUB of exactly max_payload bytes is delivered',
    run: async (ctx) => {
      const { info } = await rawSession(ctx.url, 'PING\r\n');
      const n = info.max_payload;
      const r = await raw(ctx,
        `SUB mp.x 1\r\nPUB mp.x ${n}\r\n${'y'.repeat(n)}\r\nPING\r\n`);
      return { first: r.lines[0], closed: r.closed, n: r.lines.length };
    },
  },
  {
    name: 'a PUB with a size that is not a number is refused',
    intended: { lines: SILENT },
    run: (ctx) => raw(ctx, 'PUB foo abc\r\nPING\r\n', { pongs: 0 }),
  },
  {
    name: 'a control line over 4096 bytes is refused',
    run: (ctx) => raw(ctx, `PUB ${'s'.repeat(5000)} 0\r\n\r\nPING\r\n`,
      { pongs: 0 }),
  },
  {
    name: 'SUB to a subject with an empty token is an Invalid Subject',
    run: (ctx) => raw(ctx, 'SUB foo..bar 1\r\nPING\r\n'),
  },
  {
    name: 'pedantic PUB to a wildcard subject is refused',
    run: (ctx) => raw(ctx, 'PUB foo.* 0\r\n\r\nPING\r\n',
      { connect: { pedantic: true } }),
  },
  {
    name: 'UNSUB with a maximum stops delivery after that many',
    run: (ctx) => raw(ctx, 'SUB um.x 1\r\nUNSUB 1 2\r\n' +
      'PUB um.x 1\r\na\r\nPUB um.x 1\r\nb\r\nPUB um.x 1\r\nc\r\nPING\r\n'),
  },
  {
    name: 'UNSUB of an unknown sid is ignored',
    run: (ctx) => raw(ctx, 'UNSUB 99\r\nPING\r\n'),
  },
  {
    name: 'echo false hides a connection its own messages',
    run: (ctx) => raw(ctx, 'SUB e.x 1\r\nPUB e.x 1\r\na\r\nPING\r\n',
      { connect: { echo: false } }),
  },
  {
    name: 'HPUB is delivered as HMSG with the same header block',
    run: (ctx) => {
      const h = 'NATS/1.0\r\nA: 1\r\n\r\n';
      const total = h.length + 2;
      return raw(ctx, `SUB h.x 1\r\nHPUB h.x ${h.length} ${total}\r\n` +
        `${h}hi\r\nPING\r\n`, { connect: { headers: true } });
    },
  },
  {
    name: 'HPUB whose header size exceeds its total is refused',
    intended: { lines: SILENT },
    run: (ctx) => raw(ctx, 'HPUB h.y 10 5\r\nNATS/\r\nPING\r\n',
      { connect: { headers: true }, pongs: 0 }),
  },
  {
    name: 'an empty payload is delivered as an empty message',
    run: (ctx) => raw(ctx, 'SUB ep.x 3\r\nPUB ep.x 0\r\n\r\nPING\r\n'),
  },
  {
    name: 'a reply subject is passed through on MSG',
    run: (ctx) => raw(ctx, 'SUB rp.x 1\r\nPUB rp.x rp.back 2\r\nok\r\nPING\r\n'),
  },
  {
    name: '* matches one token and > one or more',
    run: async (ctx) => {
      const star = ctx.nc.subscribe(`${ctx.uniq}.*`);
      const gt = ctx.nc.subscribe(`${ctx.uniq}.>`);
      for (const s of ['a', 'a.b', 'b']) {
        ctx.nc.publish(`${ctx.uniq}.${s}`, sc.encode(s));
      }
      ctx.nc.publish(ctx.uniq, sc.encode('root'));
      await ctx.nc.flush();
      const strip = (l) => l.map(([s, d]) => [s.slice(ctx.uniq.length), d]);
      return { star: strip(await drain(star, 2)), gt: strip(await drain(gt, 3)) };
    },
  },
  {
    name: 'a queue group delivers each message to one member',
    run: async (ctx) => {
      const subj = `${ctx.uniq}.q`;
      const a = ctx.nc.subscribe(subj, { queue: 'workers' });
      const b = ctx.nc.subscribe(subj, { queue: 'workers' });
      const plain = ctx.nc.subscribe(subj);
      await ctx.nc.flush();
      for (let i = 0; i < 20; i++) {
        ctx.nc.publish(subj, sc.encode(`${i}`));
      }
      await ctx.nc.flush();
      const [ga, gb, gp] = await Promise.all([drain(a, 20, 1000),
        drain(b, 20, 1000), drain(plain, 20)]);
      const seen = [...ga, ...gb].map(([, d]) => Number(d)).sort((x, y) => x - y);
      return { members: seen, plain: gp.length };
    },
  },
  {
    name: 'a request nobody answers fails with 503 no responders',
    run: async (ctx) => {
      try {
        await ctx.nc.request(`${ctx.uniq}.nobody`, sc.encode('x'),
          { timeout: 2000 });
        return { ok: true };
      } catch (e) {
        return { code: e.code };
      }
    },
  },
  {
    name: 'a request gets the responder\'s reply with its headers',
    run: async (ctx) => {
      const subj = `${ctx.uniq}.svc`;
      const sub = ctx.nc.subscribe(subj, {
        max: 1,
        callback: (_, m) => {
          const h = headers();
          h.set('X-Answer', '42');
          m.respond(sc.encode(`re:${sc.decode(m.data)}`), { headers: h });
        },
      });
      await ctx.nc.flush();
      const r = await ctx.nc.request(subj, sc.encode('q'), { timeout: 2000 });
      sub.unsubscribe();
      return { data: sc.decode(r.data), h: r.headers?.get('X-Answer') };
    },
  },
  {
    name: 'headers with repeated keys arrive in order',
    run: async (ctx) => {
      const subj = `${ctx.uniq}.hdr`;
      const sub = ctx.nc.subscribe(subj, { max: 1 });
      const h = headers();
      h.append('K', 'one');
      h.append('K', 'two');
      h.set('Other', 'x y');
      ctx.nc.publish(subj, sc.encode('b'), { headers: h });
      for await (const m of sub) {
        return { k: m.headers.values('K'), other: m.headers.get('Other') };
      }
      return null;
    },
  },
];
