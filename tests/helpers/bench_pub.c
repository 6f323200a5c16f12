/* bench_pub.c - the event source of `make bench` when the upstream simulator is not used:
 * POSTs status events at a paced rate through relay/httpc (libcurl multi, keep-alive), each
 * stamped with the wall-clock time it leaves, so that receivers can measure latency.
 *
 *   bench_pub [options] URL
 *     --mode ingest|nchan    ingest: the upstream's webhook shape {"event","timestamp","data"}
 *                            (for POST /v1/ingest/upstream; "timestamp" = send time, ms);
 *                            nchan: a dashboard frame {"event","data","publishedAt"} (default
 *                            ingest)
 *     --sign-key KEY         add X-Signature-Timestamp / X-Signature-SHA256 (hex HMAC-SHA256
 *                            of "ts.body" keyed by KEY), as the upstream signs its webhooks
 *     --rate N               events per second (0: as fast as --concurrency allows)
 *     --count N              events in total (default 1000)
 *     --seconds S            stop starting new events after S seconds (default 60)
 *     --concurrency N        POSTs in flight at most (default 32)
 *     --prefix P             request ids are "0x" P <index in hex, zero-padded to 64 - len(P)
 *                            digits> (default "b")
 *     --active M             requests advanced together (default 1000): event i is step
 *                            (i / M) % K of request (i / (M*K)) * M + i % M, so the events of
 *                            one request are M events apart (never reordered in flight)
 *     --first N              index of the first event (default 0): a second run with
 *                            --first = the first run's count continues the same lifecycles
 *     --statuses a,b,c       the K steps of every lifecycle (default
 *                            waiting,pending,submitted,success)
 *     --depositors N         request r is a deposit-address request: "depositAddress" is
 *                            {"address","depositAddressType":"strict","depositor",
 *                            "depositTxHash":null} with depositor wallet r % N, "0xbe5c" and
 *                            r % N in 36 hex digits (default 0: "depositAddress":null)
 *     --referrers K          the referrer of request r is "bench-<r % K>" (default 0: "bench")
 *     --channel-url T        nchan: POST to T with "{}" replaced by the request index
 *                            (e.g. http://127.0.0.1:9000/pub/r{}); default URL
 *
 * Prints one JSON summary line: {"sent","ok","status":{"200":n,...},"errors":n,"results":
 * {"accepted":n,"duplicate":n,"stale":n},"elapsedMs","rate","behind","p50Ms","p99Ms"}.
 * Exit status 0, or 2 on a usage error. SIGTERM / SIGINT stop it early (summary printed).
 * runs on: its own single thread. */
#define _GNU_SOURCE
#include "protocol/sign.h"
#include "relay/common/httpc.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 64
#define BODY_MAX 1536

struct pub;

struct slot {
    struct pub *p;
    char body[BODY_MAX];
    char url[512];
    char h_ts[64], h_sig[128];
    const char *headers[4];
    int64_t t0;
};

struct pub {
    struct event_base *base;
    struct httpc *h;
    const char *url, *channel_url, *prefix;
    int nchan;
    struct proto_hmac *key;
    double rate;
    long count, concurrency, active, first, depositors, referrers;
    int64_t seconds_ms;
    const char *steps[MAX_STEPS];
    int nsteps;
    long started, done, ok, errors, accepted, duplicate, stale;
    long status_n[600];
    int64_t t0, deadline;
    int64_t *lat;
    struct slot **free_slots;
    long nfree;
    struct event *tick;
    int stopping;
};

static void start_some(struct pub *p);

static void fill(struct pub *p, struct slot *s, long i)
{
    long m = p->active, k = p->nsteps;
    long block = i / (m * k), within = i % (m * k);
    long step = within / m, r = block * m + within % m;
    const char *st = p->steps[step];
    int64_t now = wall_ms();
    const char *reason = strcmp(st, "failure") == 0 || strcmp(st, "refund") == 0 ? "UNKNOWN"
                                                                                 : "N/A";
    char deposit[256] = "null", referrer[32] = "bench", data[1200];
    if (p->depositors > 0)
        snprintf(deposit, sizeof(deposit),
                 "{\"address\":\"0xdd%038lx\",\"depositAddressType\":\"strict\","
                 "\"depositor\":\"0xbe5c%036lx\",\"depositTxHash\":null}",
                 r, r % p->depositors);
    if (p->referrers > 0)
        snprintf(referrer, sizeof(referrer), "bench-%ld", r % p->referrers);
    /* the same data object the upstream sends in its webhooks and ws frames */
    snprintf(data, sizeof(data),
             "{\"status\":\"%s\",\"inTxHashes\":[\"0x%s%060lx\"],\"txHashes\":[],"
             "\"updatedAt\":%lld,\"originChainId\":8453,\"destinationChainId\":42161,"
             "\"depositAddress\":%s,\"requestId\":\"0x%s%0*lx\",\"referrer\":\"%s\","
             "\"details\":null,\"failReason\":\"%s\",\"refundFailReason\":\"N/A\"}",
             st, "", r, (long long)now, deposit, p->prefix, 64 - (int)strlen(p->prefix), r,
             referrer, reason);
    if (p->nchan)
        snprintf(s->body, sizeof(s->body),
                 "{\"event\":\"request.status.updated\",\"data\":%s,\"publishedAt\":%lld}", data,
                 (long long)now);
    else
        snprintf(s->body, sizeof(s->body),
                 "{\"event\":\"request.status.updated\",\"timestamp\":%lld,\"data\":%s}",
                 (long long)now, data);
    int nh = 0;
    s->headers[nh++] = "Content-Type: application/json";
    if (p->key != NULL) {
        char ts[24], hex[65];
        snprintf(ts, sizeof(ts), "%lld", (long long)now);
        proto_upstream_sign(p->key, ts, s->body, strlen(s->body), hex);
        snprintf(s->h_ts, sizeof(s->h_ts), "X-Signature-Timestamp: %s", ts);
        snprintf(s->h_sig, sizeof(s->h_sig), "X-Signature-SHA256: %s", hex);
        s->headers[nh++] = s->h_ts;
        s->headers[nh++] = s->h_sig;
    }
    s->headers[nh] = NULL;
    if (p->channel_url != NULL) {
        const char *brace = strstr(p->channel_url, "{}");
        if (brace != NULL)
            snprintf(s->url, sizeof(s->url), "%.*s%ld%s", (int)(brace - p->channel_url),
                     p->channel_url, r, brace + 2);
        else
            snprintf(s->url, sizeof(s->url), "%s", p->channel_url);
    } else {
        snprintf(s->url, sizeof(s->url), "%s", p->url);
    }
}

static void on_done(void *arg, const struct httpc_resp *r)
{
    struct slot *s = arg;
    struct pub *p = s->p;
    p->lat[p->done++] = mono_ms() - s->t0;
    if (r->err != NULL) {
        p->errors++;
    } else {
        if (r->status >= 0 && r->status < 600)
            p->status_n[r->status]++;
        if (r->status >= 200 && r->status < 300)
            p->ok++;
        if (r->body_len > 0) {
            if (strstr(r->body, "\"accepted\""))
                p->accepted++;
            else if (strstr(r->body, "\"duplicate\""))
                p->duplicate++;
            else if (strstr(r->body, "\"stale\""))
                p->stale++;
        }
    }
    p->free_slots[p->nfree++] = s;
    if (p->done == p->started && (p->stopping || p->started >= p->count)) {
        event_base_loopbreak(p->base);
        return;
    }
    start_some(p);
}

static void start_some(struct pub *p)
{
    int64_t now = mono_ms();
    if (now >= p->deadline)
        p->stopping = 1;
    if (p->stopping) {
        if (p->done == p->started)
            event_base_loopbreak(p->base);
        return;
    }
    long target = p->count;
    if (p->rate > 0) {
        long due = (long)((double)(now - p->t0) * p->rate / 1000.0) + 1;
        if (due < target)
            target = due;
    }
    while (p->started < target && p->nfree > 0) {
        struct slot *s = p->free_slots[--p->nfree];
        fill(p, s, p->first + p->started);
        struct httpc_req req;
        memset(&req, 0, sizeof(req));
        req.method = "POST";
        req.url = s->url;
        req.headers = s->headers;
        req.body = s->body;
        req.body_len = strlen(s->body);
        req.total_timeout_ms = 30000;
        req.max_response = 4096;
        req.max_drain = 65536;
        s->t0 = now;
        p->started++;
        if (httpc_request(p->h, &req, on_done, s) != 0) {
            p->errors++;
            p->done++;
            p->free_slots[p->nfree++] = s;
            p->stopping = 1;
            break;
        }
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct pub *p = arg;
    start_some(p);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    struct pub *p = arg;
    p->stopping = 1;
    if (p->done == p->started)
        event_base_loopbreak(p->base);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int usage(void)
{
    fputs("usage: bench_pub [--mode ingest|nchan] [--sign-key KEY] [--rate N] [--count N] "
          "[--seconds S] [--concurrency N] [--prefix P] [--active M] [--first N] "
          "[--statuses a,b,...] [--depositors N] [--referrers K] "
          "[--channel-url T] URL\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    static struct pub p;
    static char steps_buf[1024] = "waiting,pending,submitted,success";
    double seconds = 60;
    p.count = 1000;
    p.concurrency = 32;
    p.active = 1000;
    p.prefix = "b";
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--mode") && v) {
            p.nchan = strcmp(v, "nchan") == 0;
            i++;
        } else if (!strcmp(a, "--sign-key") && v) {
            p.key = proto_hmac_new((const unsigned char *)v, strlen(v));
            i++;
        } else if (!strcmp(a, "--rate") && v) {
            p.rate = atof(v);
            i++;
        } else if (!strcmp(a, "--count") && v) {
            p.count = atol(v);
            i++;
        } else if (!strcmp(a, "--seconds") && v) {
            seconds = atof(v);
            i++;
        } else if (!strcmp(a, "--concurrency") && v) {
            p.concurrency = atol(v);
            i++;
        } else if (!strcmp(a, "--prefix") && v) {
            p.prefix = v;
            i++;
        } else if (!strcmp(a, "--first") && v) {
            p.first = atol(v);
            i++;
        } else if (!strcmp(a, "--active") && v) {
            p.active = atol(v);
            i++;
        } else if (!strcmp(a, "--statuses") && v) {
            snprintf(steps_buf, sizeof(steps_buf), "%s", v);
            i++;
        } else if (!strcmp(a, "--depositors") && v) {
            p.depositors = atol(v);
            i++;
        } else if (!strcmp(a, "--referrers") && v) {
            p.referrers = atol(v);
            i++;
        } else if (!strcmp(a, "--channel-url") && v) {
            p.channel_url = v;
            i++;
        } else if (a[0] == '-') {
            return usage();
        } else {
            p.url = a;
        }
    }
    for (char *tok = strtok(steps_buf, ","); tok && p.nsteps < MAX_STEPS; tok = strtok(NULL, ","))
        p.steps[p.nsteps++] = tok;
    if ((p.url == NULL && p.channel_url == NULL) || p.count < 1 || p.concurrency < 1 ||
        p.active < 1 || p.nsteps == 0 || strlen(p.prefix) > 20 || p.depositors < 0 ||
        p.referrers < 0)
        return usage();

    p.lat = xcalloc((size_t)p.count, sizeof(*p.lat));
    p.free_slots = xcalloc((size_t)p.concurrency, sizeof(*p.free_slots));
    for (long i = 0; i < p.concurrency; i++) {
        struct slot *s = xcalloc(1, sizeof(*s));
        s->p = &p;
        p.free_slots[p.nfree++] = s;
    }
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    p.base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    struct httpc_opts o;
    memset(&o, 0, sizeof(o));
    o.user_agent = "bench_pub";
    o.max_idle = (unsigned)p.concurrency + 8;
    if (p.base == NULL || (p.h = httpc_new(p.base, &o)) == NULL) {
        fputs("bench_pub: cannot create the event base or httpc\n", stderr);
        return 1;
    }
    p.tick = event_new(p.base, -1, EV_PERSIST, on_tick, &p);
    struct timeval tv = {0, 1000};
    event_add(p.tick, &tv);
    struct event *sig = evsignal_new(p.base, SIGTERM, on_signal, &p);
    struct event *sigi = evsignal_new(p.base, SIGINT, on_signal, &p);
    event_add(sig, NULL);
    event_add(sigi, NULL);
    p.t0 = mono_ms();
    p.deadline = p.t0 + (int64_t)(seconds * 1000);
    start_some(&p);
    event_base_dispatch(p.base);
    int64_t elapsed = mono_ms() - p.t0;
    long behind = 0;
    if (p.rate > 0) {
        double should = (double)elapsed * p.rate / 1000.0;
        if (should > (double)p.count)
            should = (double)p.count;
        behind = (long)(should - (double)p.started);
    }
    qsort(p.lat, (size_t)p.done, sizeof(*p.lat), cmp_i64);
    printf("{\"sent\":%ld,\"ok\":%ld,\"errors\":%ld,\"status\":{", p.done, p.ok, p.errors);
    int first = 1;
    for (int c = 0; c < 600; c++)
        if (p.status_n[c]) {
            printf("%s\"%d\":%ld", first ? "" : ",", c, p.status_n[c]);
            first = 0;
        }
    printf("},\"results\":{\"accepted\":%ld,\"duplicate\":%ld,\"stale\":%ld},"
           "\"elapsedMs\":%lld,\"rate\":%.1f,\"behind\":%ld,\"p50Ms\":%lld,\"p99Ms\":%lld}\n",
           p.accepted, p.duplicate, p.stale, (long long)elapsed,
           elapsed > 0 ? (double)p.done * 1000.0 / (double)elapsed : 0.0, behind,
           (long long)(p.done ? p.lat[(p.done - 1) / 2] : 0),
           (long long)(p.done ? p.lat[(p.done - 1) * 99 / 100] : 0));
    fflush(stdout);
    event_free(p.tick);
    event_free(sig);
    event_free(sigi);
    httpc_free(p.h);
    event_base_free(p.base);
    return 0;
}
