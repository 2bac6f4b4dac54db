/* Loop-turn accounting (srv_turn.h). */
#include "srv_turn.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "srv_log.h"

/* A turn this long is logged with its phases. */
#define SRV_TURN_SLOW_MS 500

#define SRV_TURN__NAME(name, text) text,
static const char *const phase_names[] = {SRV_TURN_PHASES(SRV_TURN__NAME)};
#undef SRV_TURN__NAME

static struct {
    uv_loop_t *loop;
    uv_prepare_t prepare;
    bool started;
    enum srv_turn_phase cur;
    uint64_t mark_ns;                   /* when cur began to be charged */
    uint64_t turn_ns[SRV_TURN_PHASE_N]; /* this turn, per phase */
    uint32_t calls[SRV_TURN_PHASE_N];   /* this turn, entries per phase */
    uint64_t last_ns;                   /* the last prepare */
    uint64_t last_idle_ns;
    struct srv_turn_stats st;
} turn;

const char *srv_turn_phase_name(enum srv_turn_phase p)
{
    ASSERT(p < SRV_TURN_PHASE_N);
    return phase_names[p];
}

static void charge(uint64_t now)
{
    turn.turn_ns[turn.cur] += now - turn.mark_ns;
    turn.mark_ns = now;
}

enum srv_turn_phase srv_turn_enter(enum srv_turn_phase p)
{
    ASSERT(p < SRV_TURN_PHASE_N);
    enum srv_turn_phase prev = turn.cur;
    charge(uv_hrtime());
    turn.cur = p;
    turn.calls[p]++;
    return prev;
}

void srv_turn_leave(enum srv_turn_phase prev)
{
    ASSERT(prev < SRV_TURN_PHASE_N);
    charge(uv_hrtime());
    turn.cur = prev;
}

static void log_slow(uint64_t ms)
{
    char line[512];
    size_t n = 0;
    for (int p = 0; p < SRV_TURN_PHASE_N && n < sizeof line; p++) {
        uint64_t pms = turn.turn_ns[p] / 1000000;
        if (pms == 0 && turn.calls[p] == 0) {
            continue;
        }
        int w =
            snprintf(line + n, sizeof line - n, ", %s %llu ms (%u)",
                     phase_names[p], (unsigned long long)pms, turn.calls[p]);
        n += w > 0 ? (size_t)w : 0;
    }
    SRV_WARN("loop", "turn of %llu ms%s", (unsigned long long)ms,
             n < sizeof line ? line : "");
}

void srv_turn_end(uint64_t busy_ns)
{
    static const uint64_t bounds[] = SRV_TURN_BUCKETS_MS;
    uint64_t ms = busy_ns / 1000000;
    size_t b = 0;
    while (b < sizeof bounds / sizeof bounds[0] && ms >= bounds[b]) {
        b++;
    }
    turn.st.hist[b]++;
    turn.st.turns++;
    /* What no phase took (the poll's wakeup, handles without a phase). */
    uint64_t sum = 0;
    for (int p = 1; p < SRV_TURN_PHASE_N; p++) {
        sum += turn.turn_ns[p];
    }
    turn.turn_ns[SRV_TURN_OTHER] = busy_ns > sum ? busy_ns - sum : 0;
    int top = 0;
    for (int p = 0; p < SRV_TURN_PHASE_N; p++) {
        turn.st.phase_ms[p] += turn.turn_ns[p] / 1000000;
        if (turn.turn_ns[p] > turn.turn_ns[top]) {
            top = p;
        }
    }
    if (ms > turn.st.max_ms) {
        turn.st.max_ms = ms;
        turn.st.max_phase = (enum srv_turn_phase)top;
        turn.st.max_phase_ms = turn.turn_ns[top] / 1000000;
    }
    if (ms >= SRV_TURN_SLOW_MS) {
        log_slow(ms);
    }
    memset(turn.turn_ns, 0, sizeof turn.turn_ns);
    memset(turn.calls, 0, sizeof turn.calls);
}

static void prepare_cb(uv_prepare_t *h)
{
    (void)h;
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(turn.loop);
    uint64_t wall = now - turn.last_ns;
    uint64_t blocked = idle - turn.last_idle_ns;
    charge(now);
    srv_turn_end(wall > blocked ? wall - blocked : 0);
    turn.last_ns = now;
    turn.last_idle_ns = idle;
}

int srv_turn_start(uv_loop_t *loop, char *errmsg)
{
    ASSERT(!turn.started);
    int rv = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rv != 0) {
        return keel_err(KEEL_EIO, errmsg,
                        "cannot measure the loop's idle time: %s",
                        uv_strerror(rv));
    }
    turn.loop = loop;
    uv_prepare_init(loop, &turn.prepare);
    /* Unreferenced: the measurement alone never keeps the loop running. */
    uv_unref((uv_handle_t *)&turn.prepare);
    uv_prepare_start(&turn.prepare, prepare_cb);
    turn.started = true;
    turn.cur = SRV_TURN_OTHER;
    turn.last_ns = turn.mark_ns = uv_hrtime();
    turn.last_idle_ns = uv_metrics_idle_time(loop);
    return 0;
}

void srv_turn_stop(void)
{
    if (turn.started) {
        uv_close((uv_handle_t *)&turn.prepare, NULL);
        turn.started = false;
    }
}

void srv_turn_stats(struct srv_turn_stats *out)
{
    *out = turn.st;
}
