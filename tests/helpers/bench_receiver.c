/* bench_receiver.c - the webhook receiver of `make bench`: answers every POST with 204 on
 * keep-alive connections (libevent evhttp, one thread) and keeps its statistics in memory,
 * so that recording costs nothing per request beyond a few adds (hook_receiver writes a
 * JSON line per request; this one must not be the bottleneck of the numbers it measures).
 *
 *   bench_receiver [--host H] [--port N] [--status N] [--verify]
 *     --port N     listen port (default 0: any free port; printed as {"port":N})
 *     --status N   answer status for deliveries (default 204)
 *     --body JSON  answer this body (Content-Type: application/json) instead of none; with
 *                  --status 200 the receiver doubles as a fake upstream status API
 *     --verify     verify the Standard Webhooks signature of every delivery whose path has a
 *                  secret (POST /__secret); counts ok / bad / unchecked
 *
 * It counts connections ("connsOpened": first request seen on a connection; "connsClosed"),
 * which shows how well a client reuses keep-alive connections.
 * Per delivery it records: arrival (wall clock, microseconds), the pair (path, webhook-id)
 * in a hash set (repeats are counted as duplicates), and two latencies from the body:
 *   e2e   = arrival - "statusrelay"."publishedAt" (the upstream's publish time, ms)
 *   relay = arrival - top-level "timestamp" (the event's creation in the relay, ms)
 * into histograms with 0.1 ms buckets up to 60 s; arrivals into a 100 ms timeline.
 *
 * Control (not counted): GET /__stats -> JSON summary (see stats()); POST /__reset clears
 * everything but the secrets; POST /__mark notes the time ("markMs"; the next delivery's
 * arrival is "firstAfterMarkMs"); POST /__pause holds the answers to deliveries (each is still
 * counted at its arrival; the connection waits for its answer, so a client with a bounded
 * number of requests in flight stalls) until POST /__resume answers them all, as a receiver
 * that stopped responding for a while would ("held": answers waiting); POST /__secret body
 * "PATH SECRET" (whsec_...) sets the secret of one path; GET /__timeline -> {"startMs",
 * "bucketMs", "counts": [...], "byMinute": {"<unix minute>": arrivals}} (byMinute: the last
 * 64 wall-clock minutes).
 * Exits on SIGTERM / SIGINT.
 * runs on: its own single thread. */
#define _GNU_SOURCE /* memmem */
#include "protocol/sign.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HIST_BUCKETS 600000 /* 0.1 ms each: 60 s */
#define TL_BUCKET_MS 100
#define TL_BUCKETS 36000 /* one hour */
#define MAX_SECRETS 1024

struct hist {
    uint32_t b[HIST_BUCKETS];
    uint64_t n, over;
    int64_t max_us, min_us;
    double sum_us;
};

struct secret {
    char path[128];
    struct proto_hmac *h;
};

struct rx {
    struct event_base *base;
    int status, verify;
    const char *body;
    uint64_t requests, unique, dups, no_id;
    uint64_t sig_ok, sig_bad, sig_unchecked;
    uint64_t bytes;
    int64_t first_us, last_us, reset_us;
    int64_t mark_us, after_mark_us; /* POST /__mark; first arrival after it */
    struct hist e2e, relay;
    uint32_t tl[TL_BUCKETS];
    int64_t min_stamp[64]; /* arrivals per unix minute (wall clock), ring of 64 minutes */
    uint32_t min_count[64];
    /* open addressing set of 64-bit hashes of path + webhook-id (0 = empty) */
    uint64_t *set;
    size_t set_cap, set_n;
    struct secret secrets[MAX_SECRETS];
    int nsecrets;
    /* live connections (open addressing on the pointer; 1 = tombstone) */
    uintptr_t *conns;
    size_t conns_cap, conns_used; /* used counts tombstones too */
    uint64_t conns_opened, conns_closed;
    /* POST /__pause: deliveries whose answer waits for POST /__resume. A request whose
     * connection closes meanwhile is freed by evhttp when it is answered (evcon NULL). */
    int paused;
    struct evhttp_request **held;
    size_t held_n, held_cap;
};

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint64_t hash2(const char *a, const char *b)
{
    uint64_t h = 1469598103934665603ULL;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (const unsigned char *p = (const unsigned char *)b; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h ? h : 1;
}

/* 1 if new, 0 if seen before. */
static int set_add(struct rx *rx, uint64_t h)
{
    if ((rx->set_n + 1) * 2 > rx->set_cap) {
        size_t ncap = rx->set_cap ? rx->set_cap * 2 : 1 << 16;
        uint64_t *n = calloc(ncap, sizeof(*n));
        if (n == NULL)
            abort();
        for (size_t i = 0; i < rx->set_cap; i++) {
            if (rx->set[i] == 0)
                continue;
            size_t j = rx->set[i] & (ncap - 1);
            while (n[j] != 0)
                j = (j + 1) & (ncap - 1);
            n[j] = rx->set[i];
        }
        free(rx->set);
        rx->set = n;
        rx->set_cap = ncap;
    }
    size_t j = h & (rx->set_cap - 1);
    while (rx->set[j] != 0) {
        if (rx->set[j] == h)
            return 0;
        j = (j + 1) & (rx->set_cap - 1);
    }
    rx->set[j] = h;
    rx->set_n++;
    return 1;
}

static void hist_add(struct hist *h, int64_t us)
{
    if (us < 0)
        us = 0;
    if (h->n == 0 || us > h->max_us)
        h->max_us = us;
    if (h->n == 0 || us < h->min_us)
        h->min_us = us;
    h->n++;
    h->sum_us += (double)us;
    int64_t k = us / 100;
    if (k >= HIST_BUCKETS)
        h->over++;
    else
        h->b[k]++;
}

static double hist_q(const struct hist *h, double q)
{
    if (h->n == 0)
        return -1;
    uint64_t want = (uint64_t)(q * (double)(h->n - 1)) + 1, acc = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        acc += h->b[i];
        if (acc >= want)
            return (i + 0.5) / 10.0; /* ms, bucket middle */
    }
    return (double)h->max_us / 1000.0;
}

static void hist_json(struct evbuffer *b, const char *name, const struct hist *h)
{
    evbuffer_add_printf(b,
                        "\"%s\":{\"n\":%llu,\"p50Ms\":%.2f,\"p90Ms\":%.2f,\"p99Ms\":%.2f,"
                        "\"p999Ms\":%.2f,\"maxMs\":%.2f,\"minMs\":%.2f,\"meanMs\":%.2f}",
                        name, (unsigned long long)h->n, hist_q(h, 0.5), hist_q(h, 0.9),
                        hist_q(h, 0.99), hist_q(h, 0.999), (double)h->max_us / 1000.0,
                        (double)h->min_us / 1000.0, h->n ? h->sum_us / (double)h->n / 1000 : 0);
}

/* Value of the integer after key (e.g. "\"publishedAt\":") found in [from, end). */
static int64_t find_int(const char *from, const char *end, const char *key)
{
    size_t kl = strlen(key);
    if (from == NULL || end - from < (ptrdiff_t)kl)
        return -1;
    const char *p = memmem(from, (size_t)(end - from), key, kl);
    if (p == NULL)
        return -1;
    p += kl;
    int64_t v = 0;
    int any = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        any = 1;
    }
    return any ? v : -1;
}

static struct secret *find_secret(struct rx *rx, const char *path)
{
    for (int i = 0; i < rx->nsecrets; i++)
        if (strcmp(rx->secrets[i].path, path) == 0)
            return &rx->secrets[i];
    return NULL;
}

static size_t conn_slot(const struct rx *rx, uintptr_t p, int for_insert)
{
    size_t mask = rx->conns_cap - 1, j = (size_t)((p >> 4) * 0x9E3779B97F4A7C15ULL) & mask;
    size_t tomb = SIZE_MAX;
    while (rx->conns[j] != 0) {
        if (rx->conns[j] == p)
            return j;
        if (rx->conns[j] == 1 && tomb == SIZE_MAX)
            tomb = j;
        j = (j + 1) & mask;
    }
    return for_insert && tomb != SIZE_MAX ? tomb : j;
}

static void on_conn_close(struct evhttp_connection *evcon, void *arg)
{
    struct rx *rx = arg;
    size_t j = conn_slot(rx, (uintptr_t)evcon, 0);
    if (rx->conns[j] == (uintptr_t)evcon) {
        rx->conns[j] = 1;
        rx->conns_closed++;
    }
}

/* Count connections: the first request seen on a connection marks it opened. */
static void conn_seen(struct rx *rx, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    if (evcon == NULL)
        return;
    if ((rx->conns_used + 1) * 2 > rx->conns_cap) {
        size_t ocap = rx->conns_cap;
        uintptr_t *old = rx->conns;
        rx->conns_cap = ocap ? ocap * 2 : 4096;
        rx->conns = calloc(rx->conns_cap, sizeof(*rx->conns));
        if (rx->conns == NULL)
            abort();
        rx->conns_used = 0;
        for (size_t i = 0; i < ocap; i++)
            if (old[i] > 1) {
                rx->conns[conn_slot(rx, old[i], 1)] = old[i];
                rx->conns_used++;
            }
        free(old);
    }
    size_t j = conn_slot(rx, (uintptr_t)evcon, 1);
    if (rx->conns[j] == (uintptr_t)evcon)
        return;
    if (rx->conns[j] == 0)
        rx->conns_used++;
    rx->conns[j] = (uintptr_t)evcon;
    rx->conns_opened++;
    evhttp_connection_set_closecb(evcon, on_conn_close, rx);
}

static void reset(struct rx *rx)
{
    rx->requests = rx->unique = rx->dups = rx->no_id = 0;
    rx->sig_ok = rx->sig_bad = rx->sig_unchecked = 0;
    rx->bytes = 0;
    rx->conns_opened = rx->conns_closed = 0; /* live ones stay in the set */
    rx->first_us = rx->last_us = 0;
    rx->mark_us = rx->after_mark_us = 0;
    rx->reset_us = now_us();
    memset(&rx->e2e, 0, sizeof(rx->e2e));
    memset(&rx->relay, 0, sizeof(rx->relay));
    memset(rx->tl, 0, sizeof(rx->tl));
    memset(rx->min_stamp, 0, sizeof(rx->min_stamp));
    memset(rx->min_count, 0, sizeof(rx->min_count));
    if (rx->set)
        memset(rx->set, 0, rx->set_cap * sizeof(*rx->set));
    rx->set_n = 0;
}

static void reply_text(struct evhttp_request *req, int code, const char *ctype,
                       struct evbuffer *b)
{
    if (ctype)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", ctype);
    evhttp_send_reply(req, code, NULL, b);
}

static void stats(struct rx *rx, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    double span_s = rx->last_us > rx->first_us ? (rx->last_us - rx->first_us) / 1e6 : 0;
    evbuffer_add_printf(b,
                        "{\"requests\":%llu,\"unique\":%llu,\"duplicates\":%llu,\"noId\":%llu,"
                        "\"sigOk\":%llu,\"sigBad\":%llu,\"sigUnchecked\":%llu,\"bytes\":%llu,"
                        "\"firstMs\":%.3f,\"lastMs\":%.3f,\"spanS\":%.3f,\"rate\":%.1f,"
                        "\"markMs\":%.3f,\"firstAfterMarkMs\":%.3f,"
                        "\"connsOpened\":%llu,\"connsClosed\":%llu,\"paused\":%d,\"held\":%zu,",
                        (unsigned long long)rx->requests, (unsigned long long)rx->unique,
                        (unsigned long long)rx->dups, (unsigned long long)rx->no_id,
                        (unsigned long long)rx->sig_ok, (unsigned long long)rx->sig_bad,
                        (unsigned long long)rx->sig_unchecked, (unsigned long long)rx->bytes,
                        rx->first_us / 1000.0, rx->last_us / 1000.0, span_s,
                        span_s > 0 ? (double)(rx->requests > 1 ? rx->requests - 1 : 0) / span_s
                                   : 0.0,
                        rx->mark_us / 1000.0, rx->after_mark_us / 1000.0,
                        (unsigned long long)rx->conns_opened, (unsigned long long)rx->conns_closed,
                        rx->paused, rx->held_n);
    hist_json(b, "e2e", &rx->e2e);
    evbuffer_add(b, ",", 1);
    hist_json(b, "relay", &rx->relay);
    evbuffer_add(b, "}", 1);
    reply_text(req, 200, "application/json", b);
    evbuffer_free(b);
}

static void timeline(struct rx *rx, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    int last = -1;
    for (int i = 0; i < TL_BUCKETS; i++)
        if (rx->tl[i])
            last = i;
    evbuffer_add_printf(b, "{\"startMs\":%lld,\"bucketMs\":%d,\"counts\":[",
                        (long long)(rx->reset_us / 1000), TL_BUCKET_MS);
    for (int i = 0; i <= last; i++)
        evbuffer_add_printf(b, i ? ",%u" : "%u", rx->tl[i]);
    evbuffer_add(b, "],\"byMinute\":{", 14);
    int first = 1;
    for (int i = 0; i < 64; i++) {
        if (rx->min_stamp[i] == 0)
            continue;
        evbuffer_add_printf(b, "%s\"%lld\":%u", first ? "" : ",", (long long)rx->min_stamp[i],
                            rx->min_count[i]);
        first = 0;
    }
    evbuffer_add(b, "}}", 2);
    reply_text(req, 200, "application/json", b);
    evbuffer_free(b);
}

static void set_secret(struct rx *rx, struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    char line[512], path[128], sec[PROTO_WHSEC_MAX];
    size_t n = evbuffer_get_length(in);
    if (n >= sizeof(line))
        n = sizeof(line) - 1;
    evbuffer_remove(in, line, n);
    line[n] = '\0';
    unsigned char key[PROTO_SECRET_MAX];
    size_t keylen = 0;
    if (sscanf(line, "%127s %199s", path, sec) != 2 || proto_whsec_parse(sec, key, &keylen) != 0) {
        reply_text(req, 400, NULL, NULL);
        return;
    }
    struct secret *s = find_secret(rx, path);
    if (s == NULL) {
        if (rx->nsecrets == MAX_SECRETS) {
            reply_text(req, 507, NULL, NULL);
            return;
        }
        s = &rx->secrets[rx->nsecrets++];
        snprintf(s->path, sizeof(s->path), "%s", path);
    }
    proto_hmac_free(s->h);
    s->h = proto_hmac_new(key, keylen);
    reply_text(req, s->h ? 204 : 500, NULL, NULL);
}

/* The answer to a delivery: the configured status (and body). */
static void answer(struct rx *rx, struct evhttp_request *req)
{
    if (rx->body != NULL) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_reference(b, rx->body, strlen(rx->body), NULL, NULL);
        reply_text(req, rx->status, "application/json", b);
        evbuffer_free(b);
        return;
    }
    evhttp_send_reply(req, rx->status, NULL, NULL);
}

static void hold(struct rx *rx, struct evhttp_request *req)
{
    if (rx->held_n == rx->held_cap) {
        size_t ncap = rx->held_cap ? rx->held_cap * 2 : 256;
        struct evhttp_request **n = realloc(rx->held, ncap * sizeof(*n));
        if (n == NULL)
            abort();
        rx->held = n;
        rx->held_cap = ncap;
    }
    rx->held[rx->held_n++] = req;
}

static void resume(struct rx *rx)
{
    rx->paused = 0;
    for (size_t i = 0; i < rx->held_n; i++)
        answer(rx, rx->held[i]);
    rx->held_n = 0;
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct rx *rx = arg;
    int64_t t = now_us();
    const char *uri = evhttp_request_get_uri(req);
    char path[128];
    size_t pl = strcspn(uri, "?");
    if (pl >= sizeof(path))
        pl = sizeof(path) - 1;
    memcpy(path, uri, pl);
    path[pl] = '\0';
    if (path[0] == '/' && path[1] == '_' && path[2] == '_') {
        if (strcmp(path, "/__stats") == 0)
            stats(rx, req);
        else if (strcmp(path, "/__timeline") == 0)
            timeline(rx, req);
        else if (strcmp(path, "/__reset") == 0) {
            reset(rx);
            reply_text(req, 204, NULL, NULL);
        } else if (strcmp(path, "/__mark") == 0) {
            rx->mark_us = t;
            rx->after_mark_us = 0;
            reply_text(req, 204, NULL, NULL);
        } else if (strcmp(path, "/__pause") == 0) {
            rx->paused = 1;
            reply_text(req, 204, NULL, NULL);
        } else if (strcmp(path, "/__resume") == 0) {
            resume(rx);
            reply_text(req, 204, NULL, NULL);
        } else if (strcmp(path, "/__secret") == 0)
            set_secret(rx, req);
        else
            reply_text(req, 404, NULL, NULL);
        return;
    }
    rx->requests++;
    conn_seen(rx, req);
    if (rx->first_us == 0)
        rx->first_us = t;
    rx->last_us = t;
    if (rx->mark_us != 0 && rx->after_mark_us == 0)
        rx->after_mark_us = t;
    int64_t k = (t - rx->reset_us) / 1000 / TL_BUCKET_MS;
    if (k >= 0 && k < TL_BUCKETS)
        rx->tl[k]++;
    int64_t minute = t / 60000000;
    if (rx->min_stamp[minute % 64] != minute) {
        rx->min_stamp[minute % 64] = minute;
        rx->min_count[minute % 64] = 0;
    }
    rx->min_count[minute % 64]++;

    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *id = evhttp_find_header(h, "webhook-id");
    if (id == NULL) {
        rx->no_id++;
    } else if (set_add(rx, hash2(path, id))) {
        rx->unique++;
    } else {
        rx->dups++;
    }
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    rx->bytes += len;
    const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
    const char *end = body + len;
    const char *sr = len ? memmem(body, len, "\"statusrelay\":", 14) : NULL;
    int64_t pub = find_int(sr, end, "\"publishedAt\":");
    if (pub > 0)
        hist_add(&rx->e2e, t - pub * 1000);
    int64_t created = find_int(body, sr ? sr : end, "\"timestamp\":");
    if (created > 0)
        hist_add(&rx->relay, t - created * 1000);

    if (rx->verify) {
        struct secret *s = find_secret(rx, path);
        if (s == NULL || s->h == NULL) {
            rx->sig_unchecked++;
        } else {
            const char *ts = evhttp_find_header(h, "webhook-timestamp");
            const char *sig = evhttp_find_header(h, "webhook-signature");
            int rc = proto_sw_verify(s->h, NULL, id, ts, sig, body, len, t / 1000000,
                                     PROTO_SW_TOLERANCE_S);
            if (rc == 0)
                rx->sig_ok++;
            else
                rx->sig_bad++;
        }
    }
    if (rx->paused)
        hold(rx, req);
    else
        answer(rx, req);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopexit(((struct rx *)arg)->base, NULL);
}

int main(int argc, char **argv)
{
    static struct rx rx;
    const char *host = "127.0.0.1";
    int port = 0;
    rx.status = 204;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--host") && v)
            host = v, i++;
        else if (!strcmp(a, "--port") && v)
            port = atoi(v), i++;
        else if (!strcmp(a, "--status") && v)
            rx.status = atoi(v), i++;
        else if (!strcmp(a, "--body") && v)
            rx.body = v, i++;
        else if (!strcmp(a, "--verify"))
            rx.verify = 1;
        else {
            fprintf(stderr, "usage: bench_receiver [--host H] [--port N] [--status N] "
                            "[--body JSON] [--verify]\n");
            return 2;
        }
    }
    reset(&rx);
    rx.base = event_base_new();
    struct evhttp *http = evhttp_new(rx.base);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT);
    evhttp_set_timeout(http, 120);
    evhttp_set_max_body_size(http, 1 << 20);
    evhttp_set_gencb(http, on_request, &rx);
    struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(http, host, (uint16_t)port);
    if (s == NULL) {
        fprintf(stderr, "bench_receiver: cannot listen on %s:%d\n", host, port);
        return 1;
    }
    struct sockaddr_storage ss;
    ev_socklen_t sl = sizeof(ss);
    getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &sl);
    int bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    printf("{\"port\":%d}\n", bound);
    fflush(stdout);
    struct event *sig = evsignal_new(rx.base, SIGTERM, on_signal, &rx);
    struct event *sigi = evsignal_new(rx.base, SIGINT, on_signal, &rx);
    event_add(sig, NULL);
    event_add(sigi, NULL);
    event_base_dispatch(rx.base);
    event_free(sig);
    event_free(sigi);
    evhttp_free(http);
    event_base_free(rx.base);
    for (int i = 0; i < rx.nsecrets; i++)
        proto_hmac_free(rx.secrets[i].h);
    free(rx.set);
    free(rx.held);
    return 0;
}
