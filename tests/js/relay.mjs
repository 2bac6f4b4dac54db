// A test relay between a mirror's server and its origin's JetStream, for
// mirrors and sources with `external` (docs/decisions/0039-external-
// origins-through-the-api.md) when the origin is on another server that
// keeld cannot reach by itself (no leaf nodes or gateways). It stands in
// for a leaf node connection, over two client connections (nats.js v2):
//
//   mirror side a: requests on <api>.>          -> origin side b: <toApi>.>
//                  the answer                   <-
//   origin side b: deliveries to _RELAY.<n>     -> a: the deliver subject
//   mirror side a: flow control replies $JS.FC.> -> b
//
// With a and b one connection (one server) it relays the API only: the
// consumer's deliveries reach the mirror directly (nats-server refuses a
// client's publish with a $JS.ACK reply subject, so they could not pass
// a client anyway).
// A consumer create's deliver_subject is rewritten to _RELAY.<n>, one
// subscription on b per create, so the origin sees interest only while
// the mirror does (as a leaf node carries interest): the subscription
// goes when the mirror deletes that consumer (it drops its own
// subscription then), when the create failed or got no answer, and when
// the relay closes; a consumer so abandoned is the origin's to remove. hold(k) forwards k more
// messages of each feed then holds the rest (bounded) until release();
// lose(k) drops the next k of each feed, loseFlowControl(k) its next k
// flow control requests.
// Everything it keeps is bounded: FEEDS_MAX feeds, INFLIGHT_MAX requests,
// HELD_MAX held messages (past it one is dropped and counted in
// stats.overflow, which a test asserts is 0).
import { StringCodec } from 'nats';

const sc = StringCodec();
const FEEDS_MAX = 64;
const INFLIGHT_MAX = 32;
const HELD_MAX = 10000;
const REQUEST_MS = 5000;

export function startRelay({ a, b, api, toApi }) {
  const feeds = new Map(); // relay subject -> { dsubj, sub, budget, held }
  const subs = [];
  let inflight = 0;
  let next = 0;
  let hold = -1; // messages each feed forwards before holding; -1: all
  let closed = false;
  const stats = { requests: 0, creates: 0, delivered: 0, dropped: 0,
    overflow: 0, lost: 0, lostFc: 0 };

  // A plain client cannot publish a message under one subject to another
  // one's subscribers (a server delivering for a consumer does, and a
  // leaf node keeps it): the copies carry the deliver subject, so tests
  // through the relay compare payloads, seqs and headers.
  const isData = (m) => !(m.headers && m.headers.code > 0);
  const forward = (f, m) => {
    stats.delivered++;
    a.publish(f.dsubj, m.data, { reply: m.reply || undefined,
      headers: m.headers });
  };
  const onDelivery = (f) => (err, m) => {
    if (err || closed) {
      return;
    }
    if (isData(m) && f.ready && f.lose > 0) {
      f.lose--;
      stats.lost++;
      return;
    }
    if (!isData(m) && m.reply && f.ready && f.loseFc > 0) {
      f.loseFc--; // a flow control request
      stats.lostFc++;
      return;
    }
    // Held: all that comes after the first held delivery, heartbeats too
    // (theirs would show the held ones missing).
    if (!f.ready || f.held.length > 0 || (isData(m) && f.budget === 0)) {
      if (f.held.length >= HELD_MAX) {
        stats.overflow++;
        return;
      }
      f.held.push(m);
      return;
    }
    if (isData(m) && f.budget > 0) {
      f.budget--;
    }
    forward(f, m);
  };
  // The create's deliver subject becomes a relay subject on b.
  const drop = (rsubj) => {
    feeds.get(rsubj)?.sub.unsubscribe();
    feeds.delete(rsubj);
  };
  // The mirror deletes a consumer as it drops its subscription.
  const deleted = (subject) => {
    const i = subject.indexOf('.CONSUMER.DELETE.');
    const name = i < 0 ? null : subject.split('.').pop();
    for (const [k, f] of feeds) {
      if (name !== null && f.cname === name) {
        drop(k);
      }
    }
  };
  // rsubj's create answered: keep the consumer's name, or drop the feed.
  const created = (rsubj, r) => {
    let name = null;
    try {
      name = r === null ? null : JSON.parse(sc.decode(r.data)).name;
    } catch {
      name = null;
    }
    if (typeof name === 'string' && feeds.has(rsubj)) {
      feeds.get(rsubj).cname = name;
    } else {
      drop(rsubj);
    }
  };
  // After the create's answer: what arrived before it, as far as the
  // budget allows (nats-server's mirror ignores deliveries of a consumer
  // it has not heard of yet).
  const ready = (rsubj) => {
    const f = feeds.get(rsubj);
    if (f === undefined) {
      return;
    }
    f.ready = true;
    const early = f.held.splice(0);
    for (const m of early) {
      onDelivery(f)(null, m);
    }
  };
  const rewrite = (subject, data) => {
    if (a === b || !subject.includes('.CONSUMER.CREATE.')) {
      return { data, rsubj: null };
    }
    const req = JSON.parse(sc.decode(data));
    const dsubj = req.config?.deliver_subject;
    if (!dsubj) {
      return { data, rsubj: null };
    }
    if (feeds.size >= FEEDS_MAX) { // the oldest feed goes
      drop(feeds.keys().next().value);
    }
    const rsubj = `_RELAY.${process.pid}.${next++}`;
    const f = { dsubj, budget: hold, held: [], sub: null, cname: null,
      ready: false, lose: 0, loseFc: 0 };
    f.sub = b.subscribe(rsubj, { callback: onDelivery(f) });
    feeds.set(rsubj, f);
    stats.creates++;
    req.config.deliver_subject = rsubj;
    return { data: sc.encode(JSON.stringify(req)), rsubj };
  };
  subs.push(a.subscribe(`${api}.>`, {
    callback: (err, m) => {
      if (err || closed) {
        return;
      }
      const subject = toApi + m.subject.slice(api.length);
      stats.requests++;
      deleted(m.subject);
      if (!m.reply) {
        b.publish(subject, m.data);
        return;
      }
      if (inflight >= INFLIGHT_MAX) {
        stats.dropped++;
        return; // the asker times out, as over a congested link
      }
      const { data, rsubj } = rewrite(m.subject, m.data);
      inflight++;
      b.request(subject, data, { timeout: REQUEST_MS }).then((r) => {
        if (rsubj !== null) {
          created(rsubj, r);
        }
        if (!closed) {
          a.publish(m.reply, r.data, { headers: r.headers });
        }
        if (rsubj !== null) {
          ready(rsubj);
        }
      }, () => {
        stats.dropped++;
        if (rsubj !== null) {
          created(rsubj, null);
        }
      }).finally(() => { inflight--; });
    },
  }));
  if (a !== b) {
    subs.push(a.subscribe('$JS.FC.>', {
      callback: (err, m) => {
        if (!err && !closed) {
          b.publish(m.subject, m.data);
        }
      },
    }));
  }
  return {
    stats,
    feeds: () => feeds.size,
    // Forward k more messages of each feed (and of feeds made later),
    // then hold the rest until release().
    hold(k) {
      hold = k;
      for (const f of feeds.values()) {
        f.budget = k;
      }
    },
    // Lose the next k deliveries of each feed there is now, as a link
    // that dropped them.
    lose(k) {
      for (const f of feeds.values()) {
        f.lose = k;
      }
    },
    // Lose the next k flow control requests of each feed there is now.
    loseFlowControl(k) {
      for (const f of feeds.values()) {
        f.loseFc = k;
      }
    },
    release() {
      hold = -1;
      for (const f of feeds.values()) {
        f.budget = -1;
        for (const m of f.held.splice(0)) {
          forward(f, m);
        }
      }
    },
    // Drop every subscription on both sides (as a leaf node link that
    // went down): the origin sees no interest in its consumers' subjects.
    close() {
      closed = true;
      for (const s of subs) {
        s.unsubscribe();
      }
      for (const k of [...feeds.keys()]) {
        drop(k);
      }
    },
  };
}
