// jetstream { domain: HUB } (docs/jetstream-config.md "Domain"): the
// server answers $JS.HUB.API.> as $JS.API.>, and names the domain where
// nats-server 2.9.10 does (INFO, account info, stream info, PubAck, /varz,
// /jsz). 'domain' is a volatile field of the harness, so each case reports
// it under its own name. nats.js's jetstream({ domain }) and
// jetstreamManager({ domain }) use the prefix. A mirror and a source with
// external api $JS.HUB.API read the origin through it; through a relay
// client (tests/js/relay.mjs) nats-server's do too, and both show lag,
// active and error.
import { StringCodec } from 'nats';
import { api, pub } from './js_util.mjs';
import { startRelay } from '../js/relay.mjs';

const sc = StringCodec();
export const DOMAIN = 'HUB';
const EXT_OWN = 'keeld reads an origin through its own domain\'s API ' +
  'prefix (docs/decisions/0039-external-origins-through-the-api.md); ' +
  'nats-server 2.9.10 accepts the config but its consumer create through ' +
  'the prefix gets no answer on a single server, so it copies nothing and ' +
  'the mirror never becomes active';

const NO_ANSWER = 'keeld shows a consumer create nobody answers (no ' +
  'responders) as the feed\'s error at once, and retries with a backoff; ' +
  'nats-server 2.9.10 retries every few seconds and shows no error ' +
  '(docs/decisions/0039-external-origins-through-the-api.md)';

// Poll (bounded) until every stream named holds want messages (-1: until
// its feed shows an error); the first feed's state of each then.
async function feedsAt(ctx, names, want) {
  const end = Date.now() + 3000;
  const feed = (i) => i.mirror ?? i.sources?.[0];
  let infos = [];
  do {
    await new Promise((r) => setTimeout(r, 50));
    infos = await Promise.all(names.map((x) => api(ctx, `STREAM.INFO.${x}`,
      '')));
  } while (Date.now() < end && !infos.every((i) => (want < 0
    ? feed(i)?.error !== undefined : i.state?.messages === want)));
  return infos.map((i) => ({ messages: i.state?.messages,
    lag: feed(i)?.lag, active: feed(i)?.active >= 0,
    error: feed(i)?.error ?? null }));
}

async function hub(ctx, what, body) {
  try {
    const m = await ctx.nc.request(`$JS.${DOMAIN}.API.${what}`,
      sc.encode(JSON.stringify(body ?? {})), { timeout: 3000 });
    return JSON.parse(sc.decode(m.data));
  } catch (e) {
    return { request_error: e.code ?? String(e) };
  }
}

export const cases = [
  {
    name: 'a domain answers $JS.<domain>.API as $JS.API and names itself',
    run: async (ctx) => {
      const n = ctx.uniq;
      const info = await api(ctx, 'INFO', '');
      const dinfo = await hub(ctx, 'INFO');
      const c = await hub(ctx, `STREAM.CREATE.${n}`,
        { name: n, subjects: [`${n}.>`], storage: 'file' });
      const ack = await pub(ctx, `${n}.a`, 'one');
      const si = await api(ctx, `STREAM.INFO.${n}`, '');
      const dsi = await hub(ctx, `STREAM.INFO.${n}`);
      const list = await hub(ctx, 'STREAM.LIST');
      const other = await ctx.nc.request('$JS.OTHER.API.INFO', sc.encode(''),
        { timeout: 1000 }).then(() => 'answered', (e) => e.code ?? String(e));
      return {
        protocolInfo: ctx.nc.info?.domain ?? null,
        info: info.domain ?? null,
        viaDomain: { domain: dinfo.domain ?? null, type: dinfo.type },
        created: c.error ?? c.config?.name,
        createNamesDomain: 'domain' in c,
        ack: { ...ack, domainSeen: ack.domain ?? null },
        streamInfo: [si.domain ?? null, dsi.domain ?? null,
          dsi.state?.messages],
        listed: list.streams?.filter((s) => s.config.name === n)
          .map((s) => s.domain ?? null),
        otherDomain: other,
      };
    },
  },
  {
    name: 'nats.js jetstream({ domain }) publishes and reads through it',
    run: async (ctx) => {
      const n = ctx.uniq;
      const jsm = await ctx.nc.jetstreamManager({ domain: DOMAIN });
      await jsm.streams.add({ name: n, subjects: [`${n}.>`] });
      const js = ctx.nc.jetstream({ domain: DOMAIN });
      const acks = [];
      for (const x of ['a', 'b']) {
        const a = await js.publish(`${n}.${x}`, sc.encode(x));
        acks.push([a.stream, a.seq, a.domain, a.duplicate]);
      }
      const m = await jsm.streams.getMessage(n, { seq: 2 });
      const si = await jsm.streams.info(n);
      const ai = await jsm.getAccountInfo();
      await jsm.streams.delete(n);
      return { acks, got: [m.subject, sc.decode(m.data)],
        messages: si.state.messages, infoDomain: si.domain,
        accountDomain: ai.domain };
    },
  },
  {
    name: 'a mirror and a source through external api $JS.<domain>.API',
    intended: {
      'mirror.messages': EXT_OWN,
      'source.messages': EXT_OWN,
      'mirror.active': EXT_OWN,
    },
    run: async (ctx) => {
      const n = ctx.uniq;
      await api(ctx, `STREAM.CREATE.${n}`, { name: n,
        subjects: [`${n}.>`] });
      for (const x of ['a', 'b', 'c']) {
        await pub(ctx, `${n}.${x}`, x);
      }
      const ext = { api: `$JS.${DOMAIN}.API`, deliver: '' };
      const m = await api(ctx, `STREAM.CREATE.${n}M`, { name: `${n}M`,
        mirror: { name: n, external: ext } });
      const s = await api(ctx, `STREAM.CREATE.${n}S`, { name: `${n}S`,
        sources: [{ name: n, external: ext }] });
      // Bounded: keeld copies at once; nats-server 2.9.10 never does here.
      const end = Date.now() + 3000;
      let mi = null;
      let si = null;
      do {
        await new Promise((r) => setTimeout(r, 100));
        mi = await api(ctx, `STREAM.INFO.${n}M`, '');
        si = await api(ctx, `STREAM.INFO.${n}S`, '');
      } while (Date.now() < end && (mi.state?.messages !== 3 ||
        si.state?.messages !== 3));
      const bad = await api(ctx, `STREAM.CREATE.${n}X`, { name: `${n}X`,
        mirror: { name: n, external: { api: '$JS.API' } } });
      const wild = await api(ctx, `STREAM.CREATE.${n}Y`, { name: `${n}Y`,
        mirror: { name: n, external: { api: ext.api, deliver: 'd.*' } } });
      return {
        configs: [m.error ?? m.config?.mirror, s.error ?? s.config?.sources],
        mirror: { messages: mi.state?.messages,
          external: mi.mirror?.external, active: mi.mirror?.active >= 0 },
        source: { messages: si.state?.messages,
          external: si.sources?.[0]?.external },
        refused: [bad.error?.err_code, wild.error?.err_code],
      };
    },
  },
  {
    name: 'external feeds through a relay show lag, active and error',
    intended: { 'unanswered.error': NO_ANSWER },
    run: async (ctx) => {
      const n = ctx.uniq;
      await api(ctx, `STREAM.CREATE.${n}`, { name: n,
        subjects: [`${n}.>`] });
      for (let i = 0; i < 10; i++) {
        await pub(ctx, `${n}.x`, `m${i}`);
      }
      // The feeds' API prefix is answered by a relay client that asks
      // this server's $JS.API (tests/js/relay.mjs); nobody answers the
      // third one's.
      const relay = startRelay({ a: ctx.nc, b: ctx.nc, api: '$JS.EXT.API',
        toApi: '$JS.API' });
      try {
        const ext = { api: '$JS.EXT.API', deliver: '' };
        await api(ctx, `STREAM.CREATE.${n}M`, { name: `${n}M`,
          mirror: { name: n, external: ext } });
        await api(ctx, `STREAM.CREATE.${n}S`, { name: `${n}S`,
          sources: [{ name: n, external: ext }] });
        const caughtUp = await feedsAt(ctx, [`${n}M`, `${n}S`], 10);
        await api(ctx, `STREAM.CREATE.${n}E`, { name: `${n}E`,
          mirror: { name: n, external: { api: '$JS.NONE.API' } } });
        const [unanswered] = await feedsAt(ctx, [`${n}E`], -1);
        if (unanswered.error !== null) {
          unanswered.error = { code: unanswered.error.code,
            err_code: unanswered.error.err_code };
        }
        return { caughtUp, unanswered, relayed: relay.stats.requests > 0 };
      } finally {
        relay.close();
      }
    },
  },
];
