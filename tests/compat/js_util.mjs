// JetStream calls as a client makes them, with the reply as data: the
// parsed API reply, or { request_error } when the request itself failed
// (503 no responders, TIMEOUT).
import { StringCodec } from 'nats';

const sc = StringCodec();
export const REQUEST_MS = 3000;

async function request(ctx, subject, data, opts = {}) {
  try {
    const m = await ctx.nc.request(subject, data,
      { timeout: REQUEST_MS, ...opts });
    return JSON.parse(sc.decode(m.data));
  } catch (e) {
    return { request_error: e.code ?? String(e) };
  }
}

// $JS.API.<what> with body (an object is sent as JSON, a string as is).
export function api(ctx, what, body) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return request(ctx, `$JS.API.${what}`, sc.encode(text));
}

// A JetStream publish: a request whose reply is the PubAck.
export function pub(ctx, subject, data, opts = {}) {
  return request(ctx, subject, sc.encode(data), opts);
}

// One pull request (CONSUMER.MSG.NEXT) with `req` as its body; collects
// deliveries and statuses until `max` arrived, a status ended it, or ms.
// Each item is [stream seq, delivery count, data] or ['status', code,
// description].
export async function pull(ctx, consumer, req, { max = 100, ms = 3000,
  stream = ctx.uniq } = {}) {
  const inbox = `_INBOX.${ctx.uniq}.${Math.random().toString(36).slice(2)}`;
  const sub = ctx.nc.subscribe(inbox);
  const got = [];
  const timer = setTimeout(() => sub.unsubscribe(), ms);
  ctx.nc.publish(`$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`,
    sc.encode(typeof req === 'string' ? req : JSON.stringify(req)),
    { reply: inbox });
  for await (const m of sub) {
    if (m.headers?.code > 0 && m.data.length === 0) {
      got.push(['status', m.headers.code, m.headers.description]);
      break;
    }
    const t = (m.reply ?? '').split('.');
    got.push([Number(t[5]), Number(t[4]), sc.decode(m.data)]);
    if (got.length >= max) {
      break;
    }
  }
  clearTimeout(timer);
  sub.unsubscribe();
  return got;
}
