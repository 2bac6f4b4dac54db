// JetStream stream API: create/update/info/list/names/delete/purge, message
// get and delete, with their error codes and descriptions; publish acks and
// expectations (Nats-Msg-Id, Nats-Expected-*).
import { headers, StringCodec } from 'nats';
import { api, pub } from './js_util.mjs';

const sc = StringCodec();

const NEG = 'Keel refuses max_msgs below -1 (10052) where nats-server ' +
  'stores -5 as given';
const PAGING = 'nats-server 2.9.10 sends the paging fields limit, offset ' +
  'and total (all 0) in STREAM.INFO error replies too; keeld only in ' +
  'successful ones';
const REFUSED = 'Keel refuses a JetStream option it does not implement ' +
  '(10052 stream, 10012 consumer) instead of accepting it with no effect; ' +
  'nats-server implements it';
const PURGED = 'nats-server\'s purge error reply carries the empty ' +
  'success field purged: 0; keeld\'s error replies carry only type and error';
const TTL211 = 'Keel follows nats-server 2.11 on per-message TTL ' +
  '(docs/decisions/0034-per-message-ttl-in-the-state-machine.md)';
const BATCH = 'Keel follows nats-server 2.11 on DIRECT.GET batch and ' +
  'multi_last (Nats-Num-Pending on each message, a 204 EOB status at the ' +
  'end); nats-server 2.9.10 does not know the fields: it answers one ' +
  'message for a seq and 408 Empty Request for multi_last alone';
const XF210 = 'Keel follows nats-server 2.10 on mirror and source ' +
  'subject_transforms (docs/decisions/0037-mirror-and-source-transforms-' +
  'in-the-log.md); 2.9.10 does not know the field and ignores it';
const BYTES = 'Keel counts a message as subject + headers + payload bytes; ' +
  'nats-server adds its file store record overhead (about 30 bytes a ' +
  'message)';

// Every reply to one DIRECT.GET request with body, until a status or a
// message without Nats-Num-Pending (a reply of one, as nats.js reads it):
// [seq, subject, pending] or ['status', code, description].
async function directGet(ctx, body) {
  const inbox = `_INBOX.${ctx.uniq}.${Math.random().toString(36).slice(2)}`;
  const sub = ctx.nc.subscribe(inbox, { timeout: 3000 });
  const got = [];
  ctx.nc.publish(`$JS.API.DIRECT.GET.${ctx.uniq}`,
    sc.encode(JSON.stringify(body)), { reply: inbox });
  try {
    for await (const m of sub) {
      const h = m.headers;
      if (h?.code > 0) {
        got.push(['status', h.code, h.description]);
        break;
      }
      const np = h?.get('Nats-Num-Pending') || null;
      got.push([Number(h?.get('Nats-Sequence')), h?.get('Nats-Subject'),
        np === null ? null : Number(np)]);
      if (np === null || got.length > 20) {
        break;
      }
    }
  } catch (e) {
    got.push(['error', e.code ?? String(e)]);
  }
  sub.unsubscribe();
  return got;
}

// A stream named after the case, capturing <name>.>.
function cfg(ctx, more = {}) {
  return { name: ctx.uniq, subjects: [`${ctx.uniq}.>`], storage: 'file',
    ...more };
}

async function create(ctx, more) {
  return api(ctx, `STREAM.CREATE.${ctx.uniq}`, cfg(ctx, more));
}

async function fill(ctx, n, subj = 'a') {
  for (let i = 1; i <= n; i++) {
    await pub(ctx, `${ctx.uniq}.${subj}`, `m${i}`);
  }
}

// STREAM.INFO of a mirror, asked again (bounded) until done(info): the
// mirror fills in the background on both servers.
async function mirrorInfo(ctx, name, done) {
  let i = {};
  for (let t = 0; t < 200; t++) {
    i = await api(ctx, `STREAM.INFO.${name}`, '');
    if (done(i)) {
      return i;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return i;
}

// The case's stream (origin: more of its config) with n messages and its
// mirror <name>M (mirror: more of the mirror's config), waited for until
// it holds them all: the mirror's name and its create reply.
async function mirrored(ctx, n, { origin, mirror } = {}) {
  await create(ctx, origin);
  await fill(ctx, n);
  const name = `${ctx.uniq}M`;
  const c = await api(ctx, `STREAM.CREATE.${name}`,
    { name, mirror: { name: ctx.uniq }, ...mirror });
  await mirrorInfo(ctx, name, (x) => x.state?.messages === n);
  return { name, c };
}

export const cases = [
  {
    name: 'STREAM.CREATE answers with the config and an empty state',
    run: (ctx) => create(ctx),
  },
  {
    name: 'STREAM.CREATE of an identical stream again succeeds',
    run: async (ctx) => {
      await create(ctx);
      return create(ctx);
    },
  },
  {
    name: 'STREAM.CREATE of a name in use with another config is 10058',
    run: async (ctx) => {
      await create(ctx);
      return create(ctx, { max_msgs: 5 });
    },
  },
  {
    name: 'STREAM.CREATE with subjects another stream has is 10065',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, `STREAM.CREATE.${ctx.uniq}b`,
        { name: `${ctx.uniq}b`, subjects: [`${ctx.uniq}.x`] });
    },
  },
  {
    name: 'STREAM.CREATE whose body names another stream is 10056',
    run: (ctx) => api(ctx, `STREAM.CREATE.${ctx.uniq}`,
      { name: 'OTHER', subjects: ['other.>'] }),
  },
  {
    name: 'STREAM.CREATE with a body that is not JSON is 10025',
    intended: { 'error.description': 'keeld appends where the JSON is broken to nats-server\'s "invalid JSON"' },
    run: (ctx) => api(ctx, `STREAM.CREATE.${ctx.uniq}`, '{nope'),
  },
  {
    name: 'STREAM.CREATE with an empty body is refused',
    intended: { 'error.description': 'keeld says the body is empty after nats-server\'s "invalid JSON"' },
    run: (ctx) => api(ctx, `STREAM.CREATE.${ctx.uniq}`, ''),
  },
  {
    name: 'STREAM.CREATE without subjects captures the stream name',
    run: (ctx) => api(ctx, `STREAM.CREATE.${ctx.uniq}`, { name: ctx.uniq }),
  },
  {
    name: 'STREAM.CREATE with a negative max_msgs is refused or normalised',
    intended: { error: NEG, max_msgs: NEG },
    run: async (ctx) => {
      const r = await create(ctx, { max_msgs: -5 });
      return { error: r.error ?? null, max_msgs: r.config?.max_msgs ?? null };
    },
  },
  {
    name: 'STREAM.UPDATE changes a limit and answers with the new config',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, `STREAM.UPDATE.${ctx.uniq}`, cfg(ctx, { max_msgs: 9 }));
    },
  },
  {
    name: 'STREAM.UPDATE of a missing stream is 10059',
    run: (ctx) => api(ctx, `STREAM.UPDATE.${ctx.uniq}`, cfg(ctx)),
  },
  {
    name: 'STREAM.UPDATE that changes the storage type is refused',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, `STREAM.UPDATE.${ctx.uniq}`,
        cfg(ctx, { storage: 'memory' }));
    },
  },
  {
    name: 'STREAM.INFO of a missing stream is 10059',
    known: { limit: PAGING, offset: PAGING, total: PAGING },
    run: (ctx) => api(ctx, `STREAM.INFO.${ctx.uniq}`, ''),
  },
  {
    name: 'STREAM.INFO shows the state after publishes',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 3);
      return api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
    },
  },
  {
    name: 'STREAM.NAMES filtered by a subject finds the stream',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, 'STREAM.NAMES', { subject: `${ctx.uniq}.x` });
    },
  },
  {
    name: 'STREAM.LIST filtered by a subject lists the stream info',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, 'STREAM.LIST', { subject: `${ctx.uniq}.x` });
    },
  },
  {
    name: 'STREAM.DELETE answers success, then 10059',
    run: async (ctx) => {
      await create(ctx);
      return [await api(ctx, `STREAM.DELETE.${ctx.uniq}`, ''),
        await api(ctx, `STREAM.DELETE.${ctx.uniq}`, '')];
    },
  },
  {
    name: 'STREAM.PURGE removes every message and moves first_seq',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 4);
      const r = await api(ctx, `STREAM.PURGE.${ctx.uniq}`, '');
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      return { r, state: i.state };
    },
  },
  {
    name: 'STREAM.PURGE with a subject filter and keep',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 3, 'a');
      await fill(ctx, 2, 'b');
      const r = await api(ctx, `STREAM.PURGE.${ctx.uniq}`,
        { filter: `${ctx.uniq}.a`, keep: 1 });
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      return { r, state: i.state };
    },
  },
  {
    name: 'STREAM.PURGE up to a sequence',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 5);
      const r = await api(ctx, `STREAM.PURGE.${ctx.uniq}`, { seq: 4 });
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      return { r, state: i.state };
    },
  },
  {
    name: 'STREAM.PURGE of a missing stream is 10059',
    intended: { purged: PURGED },
    run: (ctx) => api(ctx, `STREAM.PURGE.${ctx.uniq}`, ''),
  },
  {
    name: 'STREAM.MSG.GET by sequence returns subject, data and headers',
    run: async (ctx) => {
      await create(ctx);
      const h = headers();
      h.set('X-K', 'v');
      await pub(ctx, `${ctx.uniq}.a`, 'body', { headers: h });
      const r = await api(ctx, `STREAM.MSG.GET.${ctx.uniq}`, { seq: 1 });
      return { ...r, hdrs: r.message?.hdrs !== undefined
        ? Buffer.from(r.message.hdrs, 'base64').toString() : null };
    },
  },
  {
    name: 'STREAM.MSG.GET last_by_subj returns the newest on that subject',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 2, 'a');
      await fill(ctx, 1, 'b');
      return api(ctx, `STREAM.MSG.GET.${ctx.uniq}`,
        { last_by_subj: `${ctx.uniq}.a` });
    },
  },
  {
    name: 'STREAM.MSG.GET last_by_subj, literal and wildcard, after a delete',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 2, 'a');
      await fill(ctx, 1, 'b');
      await api(ctx, `STREAM.MSG.DELETE.${ctx.uniq}`, { seq: 3 });
      const last = async (subj) => {
        const r = await api(ctx, `STREAM.MSG.GET.${ctx.uniq}`,
          { last_by_subj: `${ctx.uniq}.${subj}` });
        return r.message?.seq ?? r.error?.err_code;
      };
      return { a: await last('a'), b: await last('b'), star: await last('*'),
        gt: await last('>') };
    },
  },
  {
    name: 'STREAM.MSG.GET of a missing sequence is 10037',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, `STREAM.MSG.GET.${ctx.uniq}`, { seq: 7 });
    },
  },
  {
    name: 'STREAM.MSG.GET of sequence 0 is a bad request',
    run: async (ctx) => {
      await create(ctx);
      return api(ctx, `STREAM.MSG.GET.${ctx.uniq}`, { seq: 0 });
    },
  },
  {
    name: 'STREAM.MSG.DELETE removes one message, then says it is gone',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 3);
      const a = await api(ctx, `STREAM.MSG.DELETE.${ctx.uniq}`, { seq: 2 });
      const b = await api(ctx, `STREAM.MSG.DELETE.${ctx.uniq}`, { seq: 2 });
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      return { a, b, messages: i.state.messages };
    },
  },
  {
    name: 'STREAM.MSG.DELETE with no_erase',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 2);
      return api(ctx, `STREAM.MSG.DELETE.${ctx.uniq}`,
        { seq: 1, no_erase: true });
    },
  },
  {
    name: 'a publish is acknowledged with the stream and sequence',
    run: async (ctx) => {
      await create(ctx);
      return [await pub(ctx, `${ctx.uniq}.a`, 'x'),
        await pub(ctx, `${ctx.uniq}.b`, 'y')];
    },
  },
  {
    name: 'a publish nobody stores gets 503 no responders',
    run: (ctx) => pub(ctx, `${ctx.uniq}.none`, 'x'),
  },
  {
    name: 'Nats-Msg-Id inside the window is a duplicate with the first seq',
    run: async (ctx) => {
      await create(ctx);
      const h = () => {
        const x = headers();
        x.set('Nats-Msg-Id', 'id-1');
        return x;
      };
      return [await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h() }),
        await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h() })];
    },
  },
  {
    name: 'Nats-Expected-Last-Sequence that does not match is 10071',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 1);
      const h = headers();
      h.set('Nats-Expected-Last-Sequence', '5');
      const ok = headers();
      ok.set('Nats-Expected-Last-Sequence', '1');
      return [await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h }),
        await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: ok })];
    },
  },
  {
    name: 'Nats-Expected-Stream naming another stream is 10060',
    run: async (ctx) => {
      await create(ctx);
      const h = headers();
      h.set('Nats-Expected-Stream', 'NOT_IT');
      return pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h });
    },
  },
  {
    name: 'Nats-Expected-Last-Msg-Id that does not match is 10070',
    run: async (ctx) => {
      await create(ctx);
      const id = headers();
      id.set('Nats-Msg-Id', 'first');
      await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: id });
      const h = headers();
      h.set('Nats-Expected-Last-Msg-Id', 'other');
      return pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h });
    },
  },
  {
    name: 'Nats-Expected-Last-Subject-Sequence that does not match is 10071',
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 1, 'a');
      await fill(ctx, 1, 'b');
      const h = headers();
      h.set('Nats-Expected-Last-Subject-Sequence', '2');
      const ok = headers();
      ok.set('Nats-Expected-Last-Subject-Sequence', '1');
      return [await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h }),
        await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: ok })];
    },
  },
  {
    name: 'max_msgs with discard old keeps the newest messages',
    intended: { bytes: BYTES },
    run: async (ctx) => {
      await create(ctx, { max_msgs: 3 });
      await fill(ctx, 5);
      return (await api(ctx, `STREAM.INFO.${ctx.uniq}`, '')).state;
    },
  },
  {
    name: 'max_msgs with discard new refuses the publish over the limit',
    run: async (ctx) => {
      await create(ctx, { max_msgs: 2, discard: 'new' });
      await fill(ctx, 2);
      return pub(ctx, `${ctx.uniq}.a`, 'over');
    },
  },
  {
    name: 'a publish over max_msg_size is refused',
    run: async (ctx) => {
      await create(ctx, { max_msg_size: 8 });
      return pub(ctx, `${ctx.uniq}.a`, 'this is longer than eight');
    },
  },
  {
    name: 'max_msgs_per_subject keeps the newest per subject',
    run: async (ctx) => {
      await create(ctx, { max_msgs_per_subject: 1 });
      await fill(ctx, 3, 'a');
      await fill(ctx, 2, 'b');
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      const m = await api(ctx, `STREAM.MSG.GET.${ctx.uniq}`,
        { last_by_subj: `${ctx.uniq}.a` });
      return { messages: i.state.messages, a: sc.decode(
        Buffer.from(m.message?.data ?? '', 'base64')) };
    },
  },
  {
    name: '$JS.API.INFO reports the account usage and limits',
    run: async (ctx) => {
      const r = await api(ctx, 'INFO', '');
      return { ...r, streams: typeof r.streams, consumers: typeof r.consumers,
        storage: typeof r.storage };
    },
  },
  {
    name: 'a mirror copies its origin at the origin\'s seqs',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      for (let i = 1; i <= 5; i++) {
        await pub(ctx, `${ctx.uniq}.${i % 2 ? 'a' : 'b'}`, `m${i}`);
      }
      const name = `${ctx.uniq}M`;
      const c = await api(ctx, `STREAM.CREATE.${name}`,
        { name, mirror: { name: ctx.uniq } });
      const i = await mirrorInfo(ctx, name, (x) => x.state?.last_seq === 5);
      const g = await api(ctx, `STREAM.MSG.GET.${name}`, { seq: 2 });
      return { created: c.config?.mirror ?? c.error,
        subjects: c.config?.subjects ?? null,
        mirror_in_create: c.mirror ?? null,
        state: i.state, mirror: { name: i.mirror?.name, lag: i.mirror?.lag,
          error: i.mirror?.error ?? null },
        get: [g.message?.subject, g.message?.seq, g.message?.data] };
    },
  },
  {
    name: 'a filtered mirror from a start seq keeps origin seqs, gaps deleted',
    intended: { 'filtered.bytes': BYTES, 'started.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      for (let i = 1; i <= 6; i++) {
        await pub(ctx, `${ctx.uniq}.${i % 2 ? 'a' : 'b'}`, `m${i}`);
      }
      await api(ctx, `STREAM.CREATE.${ctx.uniq}F`, { name: `${ctx.uniq}F`,
        mirror: { name: ctx.uniq, filter_subject: `${ctx.uniq}.a` } });
      await api(ctx, `STREAM.CREATE.${ctx.uniq}S`, { name: `${ctx.uniq}S`,
        mirror: { name: ctx.uniq, opt_start_seq: 4 } });
      const f = await mirrorInfo(ctx, `${ctx.uniq}F`,
        (x) => x.state?.messages === 3);
      const st = await mirrorInfo(ctx, `${ctx.uniq}S`,
        (x) => x.state?.messages === 3);
      const g = await api(ctx, `STREAM.MSG.GET.${ctx.uniq}F`, { seq: 2 });
      return { filtered: f.state, started: st.state,
        gap: g.error?.err_code ?? null };
    },
  },
  {
    name: 'a mirror whose origin is deleted and recreated reads past its seq',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      const { name } = await mirrored(ctx, 2);
      const d = await api(ctx, `STREAM.DELETE.${ctx.uniq}`, '');
      await create(ctx);
      for (let i = 1; i <= 4; i++) {
        await pub(ctx, `${ctx.uniq}.a`, `n${i}`);
      }
      // The new origin's seqs 1 and 2 are at or below the mirror's
      // position: both servers read on from seq 3.
      const i = await mirrorInfo(ctx, name, (x) => x.state?.last_seq === 4);
      const data = [];
      for (let s = 1; s <= 4; s++) {
        const g = await api(ctx, `STREAM.MSG.GET.${name}`, { seq: s });
        data.push(g.message?.data ?? g.error?.err_code);
      }
      return { deleted: d.success ?? d.error, state: i.state,
        mirror: { name: i.mirror?.name, lag: i.mirror?.lag,
          error: i.mirror?.error ?? null }, data };
    },
  },
  {
    name: 'mirror configs nats-server refuses are refused with its codes',
    intended: { remove: 'an update removing `mirror` promotes the mirror '
      + 'to a stream of its own, as nats-server 2.12 does; 2.9.10 refuses '
      + 'it (10055)' },
    run: async (ctx) => {
      const n = ctx.uniq;
      const codes = async (subj, body) => {
        const r = await api(ctx, subj, body);
        return [r.error?.err_code ?? 0, r.error?.description ?? ''];
      };
      const out = {};
      out.subjects = await codes(`STREAM.CREATE.${n}A`, { name: `${n}A`,
        subjects: [`${n}.x`], mirror: { name: n } });
      out.sources = await codes(`STREAM.CREATE.${n}B`, { name: `${n}B`,
        mirror: { name: n }, sources: [{ name: `${n}Z` }] });
      out.self = await codes(`STREAM.CREATE.${n}C`, { name: `${n}C`,
        mirror: { name: `${n}C` } });
      out.direct = await codes(`STREAM.CREATE.${n}D`, { name: `${n}D`,
        subjects: [`${n}.d`], mirror_direct: true });
      await api(ctx, `STREAM.CREATE.${n}E`, { name: `${n}E`,
        mirror: { name: `${n}F` } });
      out.cycle = await codes(`STREAM.CREATE.${n}F`, { name: `${n}F`,
        mirror: { name: `${n}E` } });
      out.change = await codes(`STREAM.UPDATE.${n}E`, { name: `${n}E`,
        mirror: { name: `${n}F`, filter_subject: 'x' } });
      out.limits = await codes(`STREAM.UPDATE.${n}E`, { name: `${n}E`,
        mirror: { name: `${n}F` }, max_msgs: 10 });
      await api(ctx, `STREAM.CREATE.${n}G`, { name: `${n}G`,
        subjects: [`${n}.g`] });
      out.add = await codes(`STREAM.UPDATE.${n}G`, { name: `${n}G`,
        mirror: { name: `${n}F` } });
      out.remove = await codes(`STREAM.UPDATE.${n}E`, { name: `${n}E` });
      return out;
    },
  },
  {
    name: 'a mirror of a missing origin says so in stream info',
    run: async (ctx) => {
      const c = await api(ctx, `STREAM.CREATE.${ctx.uniq}`,
        { name: ctx.uniq, mirror: { name: `${ctx.uniq}NOPE` } });
      const i = await mirrorInfo(ctx, ctx.uniq, (x) => x.mirror?.error);
      return { did_create: c.did_create ?? null, error: i.mirror?.error,
        active: i.mirror?.active, lag: i.mirror?.lag };
    },
  },
  {
    name: 'a mirror keeps its messages when the origin goes; writes to it',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      const { name } = await mirrored(ctx, 3);
      const gone = await api(ctx, `STREAM.DELETE.${ctx.uniq}`, '');
      const del = await api(ctx, `STREAM.MSG.DELETE.${name}`, { seq: 2 });
      const p = await pub(ctx, name, 'x');
      const i = await api(ctx, `STREAM.INFO.${name}`, '');
      return { gone: gone.success ?? gone.error, deleted: del.success ?? del,
        publish: p.request_error ?? p, state: i.state };
    },
  },
  {
    // docs/decisions/0036: the mirror answers $JS.API.DIRECT.GET.<origin>.
    name: 'a mirror with mirror_direct answers direct gets of a gone origin',
    run: async (ctx) => {
      const { name, c } = await mirrored(ctx, 3,
        { origin: { allow_direct: true }, mirror: { mirror_direct: true } });
      const gone = await api(ctx, `STREAM.DELETE.${ctx.uniq}`, '');
      return { mirror_direct: c.config?.mirror_direct ?? c.error,
        gone: gone.success ?? gone.error,
        seq: await directGet(ctx, { seq: 2 }),
        last: await directGet(ctx, { last_by_subj: `${ctx.uniq}.a` }),
        miss: await directGet(ctx, { seq: 9 }) };
    },
  },
  {
    name: 'a consumer filter on a mirror must fit the origin\'s subjects',
    run: async (ctx) => {
      const { name } = await mirrored(ctx, 2);
      const mk = (d, filter) => api(ctx,
        `CONSUMER.DURABLE.CREATE.${name}.${d}`, { stream_name: name,
          config: { durable_name: d, ack_policy: 'explicit',
            filter_subject: filter } });
      const ok = await mk('fits', `${ctx.uniq}.a`);
      const bad = await mk('foreign', 'elsewhere.x');
      return { ok: ok.config?.filter_subject ?? ok.error,
        pending: ok.num_pending, bad: bad.error ?? null };
    },
  },
  {
    name: 'mirror and source subject_transforms (nats-server 2.10)',
    intended: {
      'mirror.messages': XF210 + ': the mirror reads only o.a (origin ' +
        'seqs 1 and 3); 2.9.10 copies all three',
      'mirror.subjects': XF210 + ': the mirror stores o.a as m.a at the ' +
        'origin seqs; 2.9.10 stores every subject untransformed',
      'source.messages': XF210 + ': the source reads only o.a; 2.9.10 ' +
        'copies all three',
      'source.subjects': XF210 + ': the source stores o.a as s.a; 2.9.10 ' +
        'stores every subject untransformed',
      info: XF210 + ': stream info shows the transforms; 2.9.10 does not',
      configs: XF210 + ': the create replies echo subject_transforms; ' +
        '2.9.10 drops the field',
    },
    run: async (ctx) => {
      const n = ctx.uniq;
      await create(ctx);
      for (const x of ['a', 'b', 'a']) {
        await pub(ctx, `${n}.${x}`, x);
      }
      const m = await api(ctx, `STREAM.CREATE.${n}M`, { name: `${n}M`,
        mirror: { name: n, subject_transforms: [{ src: `${n}.a`,
          dest: `${n}.m.a` }] } });
      const s = await api(ctx, `STREAM.CREATE.${n}S`, { name: `${n}S`,
        sources: [{ name: n, subject_transforms: [{ src: `${n}.a`,
          dest: `${n}.s.a` }] }] });
      const mi = await mirrorInfo(ctx, `${n}M`,
        (x) => x.state?.last_seq === 3);
      // Wait for the whole copy, not a first message: 2.9.10 copies all
      // three origin messages, Keel the two of o.a (the intended difference).
      const copies = ctx.kind === 'keel' ? 2 : 3;
      const si = await mirrorInfo(ctx, `${n}S`,
        (x) => x.sources?.[0]?.lag === 0 && x.state?.messages === copies);
      const subjects = async (name, seqs) => {
        const out = [];
        for (const seq of seqs) {
          const g = await api(ctx, `STREAM.MSG.GET.${name}`, { seq });
          out.push(g.message?.subject?.slice(n.length) ?? null);
        }
        return out;
      };
      return {
        configs: [m.config?.mirror ?? m.error,
          s.config?.sources ?? s.error],
        mirror: { messages: mi.state?.messages,
          subjects: await subjects(`${n}M`, [1, 2, 3]) },
        source: { messages: si.state?.messages,
          subjects: await subjects(`${n}S`, [1, 2, 3]) },
        info: [mi.mirror?.subject_transforms ?? null,
          si.sources?.[0]?.subject_transforms ?? null],
      };
    },
  },
  {
    name: 'a stream with sources stores origin messages under its own seqs',
    intended: { 'state.bytes': BYTES },
    run: async (ctx) => {
      await create(ctx);
      for (let i = 1; i <= 5; i++) {
        await pub(ctx, `${ctx.uniq}.${i % 2 ? 'a' : 'b'}`, `m${i}`);
      }
      const name = `${ctx.uniq}S`;
      const c = await api(ctx, `STREAM.CREATE.${name}`, { name,
        subjects: [`${name}.own`], sources: [{ name: ctx.uniq,
          filter_subject: `${ctx.uniq}.a` }] });
      const i = await mirrorInfo(ctx, name, (x) => x.state?.messages === 3 &&
        x.sources?.[0]?.lag === 0);
      const own = await pub(ctx, `${name}.own`, 'own');
      const g = await api(ctx, `STREAM.MSG.GET.${name}`, { seq: 2 });
      return { created: c.config?.sources ?? c.error,
        subjects: c.config?.subjects ?? null,
        sources_in_create: c.sources ?? null, state: i.state,
        sources: (i.sources ?? []).map((x) => ({ name: x.name, lag: x.lag,
          error: x.error ?? null })),
        own: own.seq ?? own,
        get: [g.message?.subject, g.message?.seq, g.message?.data,
          Buffer.from(g.message?.hdrs ?? '', 'base64').toString()] };
    },
  },
  {
    name: 'a source of a missing origin says so in stream info',
    run: async (ctx) => {
      const c = await api(ctx, `STREAM.CREATE.${ctx.uniq}`,
        { name: ctx.uniq, sources: [{ name: `${ctx.uniq}NOPE` }] });
      const i = await mirrorInfo(ctx, ctx.uniq, (x) => x.sources?.[0]?.error);
      const s = i.sources?.[0] ?? {};
      return { did_create: c.did_create ?? null, subjects: c.config?.subjects
        ?? null, name: s.name, error: s.error, active: s.active, lag: s.lag };
    },
  },
  {
    name: 'source configs nats-server refuses are refused with its codes',
    intended: { dup: 'nats-server 2.9.10 accepts two sources with one ' +
      'name and reads one of them; Keel refuses them as 2.10 does, with ' +
      '2.10\'s text under 10052 (docs/jetstream-config.md "Sources")' },
    run: async (ctx) => {
      const n = ctx.uniq;
      const codes = async (subj, body) => {
        const r = await api(ctx, subj, body);
        return [r.error?.err_code ?? 0, r.error?.description ?? ''];
      };
      await api(ctx, `STREAM.CREATE.${n}O`, { name: `${n}O`,
        subjects: [`${n}.o`], max_msg_size: 1024 });
      const out = {};
      out.mirror = await codes(`STREAM.CREATE.${n}A`, { name: `${n}A`,
        mirror: { name: `${n}O` }, sources: [{ name: `${n}O` }] });
      out.self = await codes(`STREAM.CREATE.${n}B`, { name: `${n}B`,
        sources: [{ name: `${n}B` }] });
      out.size = await codes(`STREAM.CREATE.${n}C`, { name: `${n}C`,
        max_msg_size: 100, sources: [{ name: `${n}O` }] });
      await api(ctx, `STREAM.CREATE.${n}E`, { name: `${n}E`,
        sources: [{ name: `${n}F` }] });
      out.cycle = await codes(`STREAM.CREATE.${n}F`, { name: `${n}F`,
        sources: [{ name: `${n}E` }] });
      out.behind_mirror = await codes(`STREAM.CREATE.${n}F`, { name: `${n}F`,
        mirror: { name: `${n}E` } });
      out.dup = await codes(`STREAM.CREATE.${n}D`, { name: `${n}D`,
        sources: [{ name: `${n}O` }, { name: `${n}O` }] });
      out.add = await codes(`STREAM.UPDATE.${n}E`, { name: `${n}E`,
        sources: [{ name: `${n}F` }, { name: `${n}O` }] });
      out.start = await codes(`STREAM.UPDATE.${n}E`, { name: `${n}E`,
        sources: [{ name: `${n}F` }, { name: `${n}O`, opt_start_seq: 5 }] });
      return out;
    },
  },
  {
    name: 'republish sends each stored message with nats-server\'s headers',
    run: async (ctx) => {
      const created = await create(ctx, { republish: {
        src: `${ctx.uniq}.*`, dest: `rp.${ctx.uniq}.$1` } });
      const ho = await api(ctx, `STREAM.CREATE.${ctx.uniq}H`, {
        name: `${ctx.uniq}H`, subjects: [`${ctx.uniq}H.*`],
        republish: { dest: `rp.${ctx.uniq}.h.>`, headers_only: true } });
      const got = [];
      const sub = ctx.nc.subscribe(`rp.${ctx.uniq}.>`, { max: 4 });
      const done = (async () => {
        for await (const m of sub) {
          const hd = {};
          for (const k of ['Nats-Stream', 'Nats-Subject', 'Nats-Sequence',
            'Nats-Last-Sequence', 'Nats-Msg-Size', 'X-Trace']) {
            if (m.headers?.has(k)) {
              hd[k] = m.headers.get(k);
            }
          }
          got.push({ subject: m.subject, data: sc.decode(m.data), hd });
        }
      })();
      await ctx.nc.flush();
      const h = headers();
      h.set('X-Trace', '7');
      await pub(ctx, `${ctx.uniq}.a`, 'one');
      await pub(ctx, `${ctx.uniq}.b`, 'two', { headers: h });
      await pub(ctx, `${ctx.uniq}.a`, 'three');
      await pub(ctx, `${ctx.uniq}H.k`, 'twelve bytes');
      const timer = setTimeout(() => sub.unsubscribe(), 3000);
      await done;
      clearTimeout(timer);
      got.sort((x, y) => (x.subject + x.hd['Nats-Sequence']).localeCompare(
        y.subject + y.hd['Nats-Sequence']));
      return { republish: created.config?.republish ?? null,
        headers_only: ho.config?.republish ?? null, got };
    },
  },
  {
    name: 'republish to the stream\'s own subjects or from outside them ' +
      'is 10052',
    run: async (ctx) => {
      const cycle = await create(ctx, { republish: { dest: `${ctx.uniq}.x` } });
      const outside = await create(ctx, { republish: { src: 'elsewhere.>',
        dest: `rp.${ctx.uniq}.>` } });
      return { cycle: cycle.error, outside: outside.error };
    },
  },
  {
    name: 'a consumer with replay_policy original',
    run: async (ctx) => {
      await create(ctx);
      const r = await api(ctx, `CONSUMER.CREATE.${ctx.uniq}.r`, {
        stream_name: ctx.uniq, config: { durable_name: 'r',
          ack_policy: 'explicit', replay_policy: 'original' } });
      return { error: r.error?.err_code ?? null,
        replay: r.config?.replay_policy ?? null };
    },
  },
  {
    name: 'Nats-Rollup sub keeps only the newest message of the subject',
    run: async (ctx) => {
      await create(ctx, { allow_rollup_hdrs: true });
      await fill(ctx, 3, 'k');
      await fill(ctx, 1, 'other');
      const h = headers();
      h.set('Nats-Rollup', 'sub');
      const ack = await pub(ctx, `${ctx.uniq}.k`, 'rolled', { headers: h });
      const i = await api(ctx, `STREAM.INFO.${ctx.uniq}`, '');
      return { ack, messages: i.state.messages, first: i.state.first_seq };
    },
  },
  {
    name: 'Nats-Rollup without allow_rollup_hdrs is 10111',
    run: async (ctx) => {
      await create(ctx);
      const h = headers();
      h.set('Nats-Rollup', 'all');
      return pub(ctx, `${ctx.uniq}.k`, 'x', { headers: h });
    },
  },
  {
    name: 'a sealed stream refuses publishes, purges and unsealing',
    intended: { 'purge.purged': PURGED },
    run: async (ctx) => {
      await create(ctx);
      await fill(ctx, 1);
      const seal = await api(ctx, `STREAM.UPDATE.${ctx.uniq}`,
        cfg(ctx, { sealed: true }));
      return {
        sealed: seal.config?.sealed ?? seal.error,
        pub: await pub(ctx, `${ctx.uniq}.a`, 'late'),
        purge: await api(ctx, `STREAM.PURGE.${ctx.uniq}`, ''),
        unseal: (await api(ctx, `STREAM.UPDATE.${ctx.uniq}`,
          cfg(ctx, { sealed: false }))).error ?? 'unsealed',
      };
    },
  },
  {
    name: 'a publish with a Nats-TTL header to a stream without allow_msg_ttl',
    intended: { '': TTL211 + ': without allow_msg_ttl a Nats-TTL publish is refused (10166 \'per-message TTL is disabled\'); nats-server 2.9.10 does not know the header and stores the message forever' },
    run: async (ctx) => {
      await create(ctx);
      const h = headers();
      h.set('Nats-TTL', '1s');
      const r = await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h });
      return r.error?.err_code ?? r.seq;
    },
  },
  {
    name: 'a stream with allow_msg_ttl expires a Nats-TTL message',
    intended: {
      allow: TTL211 + ': the config echoes allow_msg_ttl; nats-server 2.9.10 does not know the field and drops it',
      messages: TTL211 + ': the message goes when its 1s TTL passes; nats-server 2.9.10 keeps it',
    },
    run: async (ctx) => {
      const c = await create(ctx, { allow_msg_ttl: true });
      const h = headers();
      h.set('Nats-TTL', '1s');
      const r = await pub(ctx, `${ctx.uniq}.a`, 'x', { headers: h });
      // Bounded: keeld's 1s tick removes it within about 2s.
      let messages = 1;
      for (let t = 0; t < 100 && messages !== 0; t++) {
        await new Promise((res) => setTimeout(res, 50));
        messages = (await api(ctx, `STREAM.INFO.${ctx.uniq}`, '')).state.messages;
      }
      return { allow: c.config?.allow_msg_ttl ?? null, seq: r.seq, messages };
    },
  },
  {
    name: 'placement tags a single server does not carry are refused by Keel',
    intended: {
      error: 'keeld refuses placement tags its own server_tags do not hold (10005, as a cluster answers) rather than accept a placement it cannot honour; nats-server 2.9.10 ignores placement outside a cluster',
    },
    run: async (ctx) => {
      const r = await api(ctx, `STREAM.CREATE.${ctx.uniq}`, { name: ctx.uniq,
        subjects: [`${ctx.uniq}.>`], placement: { tags: ['az:9'] } });
      const plain = await api(ctx, `STREAM.CREATE.${ctx.uniq}P`, {
        name: `${ctx.uniq}P`, subjects: [`${ctx.uniq}P.>`],
        placement: { tags: [] } });
      return { error: r.error?.err_code ?? null,
        empty_tags_ok: plain.error?.err_code ?? 0 };
    },
  },
  {
    name: 'DIRECT.GET batch and multi_last (nats-server 2.11) answer more',
    intended: { batch: BATCH, multi_last: BATCH },
    run: async (ctx) => {
      await create(ctx, { allow_direct: true });
      await fill(ctx, 2, 'a');
      await fill(ctx, 1, 'b');
      return {
        one: await directGet(ctx, { seq: 2 }),
        batch: await directGet(ctx, { seq: 1, batch: 2 }),
        multi_last: await directGet(ctx, { multi_last: [`${ctx.uniq}.*`] }),
        bad: await directGet(ctx, { seq: 1, last_by_subj: `${ctx.uniq}.a` }),
      };
    },
  },
];
