"""The scale rows of tools/bench-vs-nats (`--only scale --streams N`).

One N-node cluster of one server at a time (keeld, then nats-server 2.9.10,
then keeld again when --rounds is 2 or more ...): create N R3 streams and
one durable pull consumer each through the JetStream API, then measure

- create: seconds until every STREAM.CREATE (then every consumer create)
  was answered, WINDOW requests in flight, spread over the nodes' client
  ports, and until every stream and consumer names a leader;
- RSS (VmRSS) and open file descriptors of every node, from /proc;
- idle CPU of every node over --idle seconds with no client traffic:
  utime + stime from /proc/PID/stat, as a percentage of one core;
- failover: kill -9 of the node leading most groups (streams and
  consumers), then seconds until every group it led names another leader
  (STREAM.INFO / CONSUMER.INFO through the other nodes, all in flight at
  once, every 50 ms);
- catch-up: the killed node started again on its data dir, seconds until
  its /healthz answers 200 (both servers: every group of the node current).

The JetStream API requests go through a small NATS client of its own (a
socket, CONNECT, one wildcard inbox): it keeps WINDOW requests in flight,
which keel bench's libnats requests would not.
"""
import json
import os
import random
import select
import socket
import string
import time
import urllib.error
import urllib.request

WINDOW = 64            # API requests in flight per run
REQ_TIMEOUT_S = 30.0   # one API request
CREATE_RETRIES = 5     # a create answered 503 / not at all is sent again
LEADERS_WAIT_S = 300.0  # every group led after the creates
FAILOVER_WAIT_S = 120.0
CATCHUP_WAIT_S = 180.0
POLL_S = 0.05          # pace of the failover and health polls
SETTLE_S = 5.0         # after the last group is led, before the idle window
CLK_TCK = os.sysconf("SC_CLK_TCK")


class Nats:
    """One NATS connection that sends requests and matches replies by
    their inbox token."""

    def __init__(self, url):
        host, port = url.split("://")[-1].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.buf = b""
        self.inbox = "_INBOX." + "".join(
            random.choices(string.ascii_letters, k=12))
        self._line()  # INFO
        self.sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false,"headers":true,'
            b'"no_responders":true,"protocol":1}\r\n'
            + f"SUB {self.inbox}.* 1\r\nPING\r\n".encode())
        while True:
            kind, _ = self._next(10.0)
            if kind == "PONG":
                break

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def _fill(self, timeout):
        r, _, _ = select.select([self.sock], [], [], max(timeout, 0))
        if not r:
            return False
        d = self.sock.recv(1 << 20)
        if not d:
            raise ConnectionError("server closed the connection")
        self.buf += d
        return True

    def _line(self, timeout=10.0):
        end = time.monotonic() + timeout
        while b"\r\n" not in self.buf:
            if not self._fill(end - time.monotonic()) and \
                    time.monotonic() >= end:
                raise TimeoutError("no line from the server")
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def _next(self, timeout):
        """("MSG", (token, status, payload)), ("PONG", None), or
        (None, None) when nothing came within timeout."""
        end = time.monotonic() + timeout
        while True:
            if b"\r\n" in self.buf:
                line, rest = self.buf.split(b"\r\n", 1)
                head = line.split()
                op = head[0].upper() if head else b""
                if op in (b"MSG", b"HMSG"):
                    total = int(head[-1])
                    hlen = int(head[-2]) if op == b"HMSG" else 0
                    if len(rest) < total + 2:
                        if not self._fill(end - time.monotonic()) and \
                                time.monotonic() >= end:
                            return None, None
                        continue
                    hdr, payload = rest[:hlen], rest[hlen:total]
                    self.buf = rest[total + 2:]
                    status = 0
                    if hdr.startswith(b"NATS/1.0 "):
                        status = int(hdr[9:12])
                    token = head[1].decode().rsplit(".", 1)[-1]
                    return "MSG", (token, status, payload)
                self.buf = rest
                if op == b"PING":
                    self.sock.sendall(b"PONG\r\n")
                elif op == b"PONG":
                    return "PONG", None
                elif op == b"-ERR":
                    raise ConnectionError(line.decode())
                continue
            left = end - time.monotonic()
            if left <= 0 or not self._fill(left):
                if time.monotonic() >= end:
                    return None, None

    def send(self, token, subject, body):
        b = body.encode()
        self.sock.sendall(
            f"PUB {subject} {self.inbox}.{token} {len(b)}\r\n".encode()
            + b + b"\r\n")


def requests(conns, items, timeout=REQ_TIMEOUT_S):
    """Send every (subject, body) of items, at most WINDOW in flight,
    item k through conns[k % len(conns)]. Returns one answer per item:
    the decoded JSON, {"status": 503} for no responders, or None when
    nothing came within timeout."""
    out = [None] * len(items)
    nxt = 0
    inflight = {}  # token -> (index, deadline)
    while nxt < len(items) or inflight:
        while nxt < len(items) and len(inflight) < WINDOW:
            c = conns[nxt % len(conns)]
            tok = str(nxt)
            c.send(tok, *items[nxt])
            inflight[tok] = (nxt, time.monotonic() + timeout)
            nxt += 1
        got = False
        for c in conns:
            while True:
                kind, m = c._next(0 if got else 0.001)
                if kind != "MSG":
                    break
                got = True
                tok, status, payload = m
                if tok in inflight:
                    k, _ = inflight.pop(tok)
                    if status:
                        out[k] = {"status": status}
                    else:
                        try:
                            out[k] = json.loads(payload)
                        except ValueError:
                            out[k] = {"status": -1}
        now = time.monotonic()
        for tok, (k, dl) in list(inflight.items()):
            if now > dl:
                del inflight[tok]
    return out


def ok(ans):
    return isinstance(ans, dict) and "error" not in ans and \
        "status" not in ans


def create_items(n):
    streams = [(f"$JS.API.STREAM.CREATE.S{i}", json.dumps({
        "name": f"S{i}", "subjects": [f"s{i}.>"], "num_replicas": 3,
        "storage": "file"})) for i in range(n)]
    consumers = [(f"$JS.API.CONSUMER.DURABLE.CREATE.S{i}.C", json.dumps({
        "stream_name": f"S{i}", "config": {
            "durable_name": "C", "ack_policy": "explicit",
            "deliver_policy": "all"}})) for i in range(n)]
    return streams, consumers


def create_all(conns, items):
    """Every item until answered without error (each retried at most
    CREATE_RETRIES times). Returns (seconds, failed count, first error)."""
    t0 = time.monotonic()
    todo = list(range(len(items)))
    err = None
    for _ in range(CREATE_RETRIES + 1):
        if not todo:
            break
        ans = requests(conns, [items[k] for k in todo])
        nxt = []
        for k, a in zip(todo, ans):
            if not ok(a):
                nxt.append(k)
                err = err or a
        todo = nxt
    return time.monotonic() - t0, len(todo), err


def info_items(n, which=None):
    which = range(n) if which is None else which
    return ([(f"$JS.API.STREAM.INFO.S{i}", "") for i in which],
            [(f"$JS.API.CONSUMER.INFO.S{i}.C", "") for i in which])


def leaders(conns, n):
    """(stream leaders, consumer leaders): a name or None per index."""
    si, ci = info_items(n)
    ls = [(a or {}).get("cluster", {}).get("leader") if ok(a) else None
          for a in requests(conns, si)]
    lc = [(a or {}).get("cluster", {}).get("leader") if ok(a) else None
          for a in requests(conns, ci)]
    return ls, lc


def proc_stat(pid):
    """utime + stime of pid in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def proc_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def monitor_url(node):
    """The node's monitoring URL from its current ports file."""
    path = os.path.join(node.dir, f"{node.ports_name}_{node.proc.pid}.ports")
    with open(path) as f:
        return (json.load(f).get("monitoring") or [None])[0]


LAST_HEALTH = [""]


def healthz(node):
    """The status of the node's /healthz (0: no answer); its body in
    LAST_HEALTH[0]."""
    try:
        url = monitor_url(node)
        with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
            LAST_HEALTH[0] = r.read().decode(errors="replace")
            return r.status
    except urllib.error.HTTPError as e:
        LAST_HEALTH[0] = e.read().decode(errors="replace")
        return e.code
    except (OSError, ValueError, TypeError, urllib.error.URLError) as e:
        LAST_HEALTH[0] = str(e)
        return 0


def run_one(cluster, n, idle_s, log):
    """The scale measurements on one running cluster (see the module
    docstring). Returns a dict of results; restarts the killed node."""
    res = {"server": cluster.name, "streams": n,
           "load_start": os.getloadavg()[0]}
    conns = [Nats(node.url) for node in cluster.nodes]
    try:
        streams, consumers = create_items(n)
        t, failed, err = create_all(conns, streams)
        res["create_streams_s"], res["create_streams_failed"] = t, failed
        log(f"{cluster.name}: {n - failed} of {n} streams created in {t:.1f} s"
            + (f" (last error {err})" if failed else ""))
        t, failed, err = create_all(conns, consumers)
        res["create_consumers_s"], res["create_consumers_failed"] = t, failed
        log(f"{cluster.name}: {n - failed} of {n} consumers created in "
            f"{t:.1f} s" + (f" (last error {err})" if failed else ""))
        t0 = time.monotonic()
        while True:
            ls, lc = leaders(conns, n)
            missing = ls.count(None) + lc.count(None)
            if missing == 0 or time.monotonic() - t0 > LEADERS_WAIT_S:
                break
            time.sleep(1.0)  # polling the leaders, bounded above
        res["all_led_s"] = time.monotonic() - t0
        res["unled_groups"] = missing
        log(f"{cluster.name}: every group led {res['all_led_s']:.1f} s after "
            f"the creates ({missing} without a leader)")
        for c in conns:
            c.close()
        conns = []
        time.sleep(SETTLE_S)  # let the creates' work drain before idling
        pids = [node.proc.pid for node in cluster.nodes]
        c0 = [proc_stat(p) for p in pids]
        w0 = time.monotonic()
        time.sleep(idle_s)  # the idle window itself
        c1 = [proc_stat(p) for p in pids]
        wall = time.monotonic() - w0
        res["idle_cpu_pct"] = [100 * (b - a) / wall for a, b in zip(c0, c1)]
        res["load_idle"] = os.getloadavg()[0]
        res["rss_mb"] = [proc_rss_mb(p) for p in pids]
        res["fds"] = [proc_fds(p) for p in pids]
        log(f"{cluster.name}: idle CPU % per node "
            + " ".join(f"{x:.1f}" for x in res["idle_cpu_pct"])
            + f" (load {res['load_idle']:.1f}); RSS MB "
            + " ".join(f"{x:.0f}" for x in res["rss_mb"])
            + "; fds " + " ".join(str(x) for x in res["fds"]))

        # Failover: kill -9 the node leading most groups.
        names = [f"n{i + 1}" for i in range(len(cluster.nodes))]
        conns = [Nats(node.url) for node in cluster.nodes]
        ls, lc = leaders(conns, n)
        count = {nm: ls.count(nm) + lc.count(nm) for nm in names}
        vname = max(names, key=lambda nm: count[nm])
        v = names.index(vname)
        res["leaders_per_node"] = [count[nm] for nm in names]
        conns[v].close()
        conns = conns[:v] + conns[v + 1:]
        pend_s = [i for i in range(n) if ls[i] == vname]
        pend_c = [i for i in range(n) if lc[i] == vname]
        res["failover_groups"] = len(pend_s) + len(pend_c)
        victim = cluster.nodes[v]
        victim.proc.kill()
        t0 = time.monotonic()
        victim.proc.wait()
        while (pend_s or pend_c) and time.monotonic() - t0 < FAILOVER_WAIT_S:
            si, _ = info_items(n, pend_s)
            _, ci = info_items(n, pend_c)
            a_s = requests(conns, si, timeout=5.0) if pend_s else []
            a_c = requests(conns, ci, timeout=5.0) if pend_c else []
            pend_s = [i for i, a in zip(pend_s, a_s)
                      if not (ok(a) and a.get("cluster", {}).get("leader")
                              not in (None, vname))]
            pend_c = [i for i, a in zip(pend_c, a_c)
                      if not (ok(a) and a.get("cluster", {}).get("leader")
                              not in (None, vname))]
            if pend_s or pend_c:
                time.sleep(POLL_S)  # polling pace, bounded above
        res["failover_s"] = time.monotonic() - t0
        res["failover_unled"] = len(pend_s) + len(pend_c)
        log(f"{cluster.name}: killed {vname} (leader of {count[vname]} "
            f"groups): all failed over in {res['failover_s']:.1f} s "
            f"({res['failover_unled']} still without a leader)")

        # Catch-up: start it again on its data dir.
        t0 = time.monotonic()
        victim.start()
        while healthz(victim) != 200 and \
                time.monotonic() - t0 < CATCHUP_WAIT_S:
            time.sleep(POLL_S)  # polling /healthz, bounded above
        res["catchup_s"] = time.monotonic() - t0
        res["catchup_healthy"] = healthz(victim) == 200
        log(f"{cluster.name}: restarted {vname} healthy in "
            f"{res['catchup_s']:.1f} s"
            + ("" if res["catchup_healthy"] else
               f" (NOT healthy, gave up: {LAST_HEALTH[0][:300]})"))
        res["load_end"] = os.getloadavg()[0]
    finally:
        for c in conns:
            c.close()
    return res


def fmt_list(xs, f):
    return " / ".join(f.format(x) for x in xs)


def print_results(results, commit, nats_version, cluster_n):
    print(f"\nScale rows: {cluster_n}-node clusters, R3 streams with one "
          "durable pull consumer each")
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; keeld: "
          f"commit {commit}; {nats_version}; {os.cpu_count()} CPUs")
    for r in results:
        print(f"\n{r['server']}, {r['streams']:,} streams "
              f"(load {r['load_start']:.1f} at the start, "
              f"{r['load_idle']:.1f} after the idle window, "
              f"{r['load_end']:.1f} at the end):")
        print(f"  create streams      {r['create_streams_s']:.1f} s "
              f"({r['streams'] / r['create_streams_s']:,.0f}/s; "
              f"{r['create_streams_failed']} failed)")
        print(f"  create consumers    {r['create_consumers_s']:.1f} s "
              f"({r['streams'] / r['create_consumers_s']:,.0f}/s; "
              f"{r['create_consumers_failed']} failed)")
        print(f"  every group led     {r['all_led_s']:.1f} s later "
              f"({r['unled_groups']} not)")
        print(f"  RSS per node        {fmt_list(r['rss_mb'], '{:.0f}')} MB")
        print(f"  fds per node        {fmt_list(r['fds'], '{}')}")
        print(f"  idle CPU per node   "
              f"{fmt_list(r['idle_cpu_pct'], '{:.1f}')} % of a core")
        print(f"  leaders per node    "
              f"{fmt_list(r['leaders_per_node'], '{}')}")
        print(f"  failover            {r['failover_s']:.1f} s for "
              f"{r['failover_groups']} groups "
              f"({r['failover_unled']} not failed over)")
        print(f"  restarted catch-up  {r['catchup_s']:.1f} s"
              + ("" if r["catchup_healthy"] else " (never healthy)"))
