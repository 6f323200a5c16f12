/* ws_load.c - websocket load client of `make bench` (libwebsockets, one thread): opens N
 * client connections, subscribes each one, and measures how many event frames arrive and
 * how late, from the "publishedAt" stamps inside each frame.
 *
 *   ws_load [options] ws://HOST:PORT/PATH
 *     --clients N        connections (default 100)
 *     --mode M           relay-all:  wait for the ready greeting, send --sub-all, wait for ack
 *                        relay-own:  the same with --sub-own ({id} = this client's request id)
 *                        plain:      no greeting, no subscribe: subscribed once open (nchan);
 *                                    "{i}" in PATH is replaced by the client index
 *                        (default relay-all)
 *     --sub-all JSON     default {"type":"subscribe","event":"request.status.updated",
 *                        "token":"{token}","snapshotLimit":0}
 *     --sub-own JSON     default {"type":"subscribe","event":"request.status.updated",
 *                        "filters":{"id":"{id}"}}
 *     --token T          replaces {token}
 *     --prefix P         client i's request id: "0x" P <i in hex, zero-padded to 64-len(P)>
 *                        (bench_pub's scheme)
 *     --connect-batch N  handshakes in progress at most (default 256)
 *     --seconds S        give up after S seconds in all (default 120)
 *     --setup-seconds S  stop waiting for connections after S seconds (default 60)
 *     --expect N         exit once N event frames arrived (default: until SIGTERM/--seconds)
 *
 * Event frames are text frames containing "publishedAt"; frames whose "statusrelay" object
 * says "snapshot":true are counted apart. Latencies (wall clock, 0.1 ms buckets):
 *   origin = arrival - the LAST "publishedAt" in the frame (the upstream's publish time in a
 *            relay frame, nested in "statusrelay"; the publisher's stamp in an nchan message)
 *   frame  = arrival - the FIRST "publishedAt" (the top-level stamp: when the relay sent it)
 * Output, one JSON line each: {"type":"ready",...} once every client is subscribed or has
 * failed, {"type":"progress","messages":n} at most every 500 ms while frames arrive, then
 * {"type":"summary","clients","connected","subscribed","failed","closed",
 * "messages","snapshots","firstMs","lastMs","rate","origin":{p50Ms,p99Ms,...},"frame":{...}}.
 * SIGUSR1 resets the message counters (end of a warm-up); SIGUSR2 prints a summary line and
 * goes on. SIGTERM / SIGINT: summary, exit.
 * runs on: its own single thread. */
#define _GNU_SOURCE
#include <libwebsockets.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HIST_BUCKETS 600000

struct hist {
    uint32_t b[HIST_BUCKETS];
    uint64_t n;
    int64_t max_us;
    double sum_us;
};

enum cstate { C_IDLE = 0, C_CONNECTING, C_OPEN, C_SUBSCRIBING, C_SUBSCRIBED, C_FAILED, C_CLOSED };

struct conn {
    int idx;
    enum cstate st;
    struct lws *wsi;
    int want_send;
    unsigned char *buf; /* fragment reassembly */
    size_t len;
};

enum mode { M_ALL, M_OWN, M_PLAIN };

static struct {
    struct lws_context *ctx;
    const char *host, *path, *token, *prefix, *sub_all, *sub_own;
    int port;
    enum mode mode;
    int clients, batch;
    struct conn *c;
    int next_conn, handshaking, connected, subscribed, failed, closed;
    uint64_t messages, snapshots, expect;
    int64_t first_us, last_us;
    struct hist origin, frame;
    int64_t t0_ms, deadline_ms, setup_deadline_ms;
    int ready_printed;
    uint64_t progress_printed;
    int64_t progress_ms;
    lws_sorted_usec_list_t sul;
} g;

static volatile sig_atomic_t stop_flag, reset_flag, dump_flag;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void hist_add(struct hist *h, int64_t us)
{
    if (us < 0)
        us = 0;
    if (us > h->max_us)
        h->max_us = us;
    h->n++;
    h->sum_us += (double)us;
    int64_t k = us / 100;
    h->b[k < HIST_BUCKETS ? k : HIST_BUCKETS - 1]++;
}

static double hist_q(const struct hist *h, double q)
{
    if (h->n == 0)
        return -1;
    uint64_t want = (uint64_t)(q * (double)(h->n - 1)) + 1, acc = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        acc += h->b[i];
        if (acc >= want)
            return (i + 0.5) / 10.0;
    }
    return (double)h->max_us / 1000.0;
}

static void hist_print(const char *name, const struct hist *h)
{
    printf("\"%s\":{\"n\":%llu,\"p50Ms\":%.2f,\"p90Ms\":%.2f,\"p99Ms\":%.2f,\"p999Ms\":%.2f,"
           "\"maxMs\":%.2f,\"meanMs\":%.2f}",
           name, (unsigned long long)h->n, hist_q(h, 0.5), hist_q(h, 0.9), hist_q(h, 0.99),
           hist_q(h, 0.999), (double)h->max_us / 1000.0,
           h->n ? h->sum_us / (double)h->n / 1000.0 : 0.0);
}

static int64_t int_after(const char *p, const char *end)
{
    int64_t v = 0;
    int any = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        any = 1;
    }
    return any ? v : -1;
}

static void on_message(const char *m, size_t n)
{
    static const char key[] = "\"publishedAt\":";
    const size_t kl = sizeof(key) - 1;
    const char *end = m + n;
    const char *first = memmem(m, n, key, kl);
    if (first == NULL)
        return; /* greeting, ack, error */
    int64_t t = now_us();
    if (memmem(m, n, "\"snapshot\":true", 15) != NULL) {
        g.snapshots++;
        return;
    }
    const char *last = first, *p;
    while ((p = memmem(last + kl, (size_t)(end - last - kl), key, kl)) != NULL)
        last = p;
    int64_t f = int_after(first + kl, end), o = int_after(last + kl, end);
    g.messages++;
    if (g.first_us == 0)
        g.first_us = t;
    g.last_us = t;
    if (o > 0)
        hist_add(&g.origin, t - o * 1000);
    if (f > 0)
        hist_add(&g.frame, t - f * 1000);
    if (g.expect > 0 && g.messages >= g.expect)
        stop_flag = 1;
}

static void print_ready(void)
{
    if (g.ready_printed)
        return;
    g.ready_printed = 1;
    printf("{\"type\":\"ready\",\"clients\":%d,\"subscribed\":%d,\"failed\":%d,\"ms\":%lld}\n",
           g.clients, g.subscribed, g.failed, (long long)(mono_ms_() - g.t0_ms));
    fflush(stdout);
}

static void check_ready(void)
{
    if (!g.ready_printed && g.next_conn == g.clients && g.handshaking == 0 &&
        g.subscribed + g.failed + g.closed >= g.clients)
        print_ready();
}

static void expand(char *out, size_t outsz, const char *tmpl, int idx)
{
    char id[80];
    snprintf(id, sizeof(id), "0x%s%0*x", g.prefix, 64 - (int)strlen(g.prefix), idx);
    size_t o = 0;
    for (const char *s = tmpl; *s && o + 1 < outsz;) {
        const char *val = NULL;
        size_t skip = 0;
        char num[16];
        if (strncmp(s, "{id}", 4) == 0)
            val = id, skip = 4;
        else if (strncmp(s, "{token}", 7) == 0)
            val = g.token, skip = 7;
        else if (strncmp(s, "{i}", 3) == 0) {
            snprintf(num, sizeof(num), "%d", idx);
            val = num, skip = 3;
        }
        if (val != NULL) {
            size_t l = strlen(val);
            if (o + l >= outsz)
                break;
            memcpy(out + o, val, l);
            o += l;
            s += skip;
        } else {
            out[o++] = *s++;
        }
    }
    out[o] = '\0';
}

static void start_conns(void)
{
    while (g.next_conn < g.clients && g.handshaking < g.batch) {
        struct conn *c = &g.c[g.next_conn];
        c->idx = g.next_conn++;
        char path[512];
        expand(path, sizeof(path), g.path, c->idx);
        struct lws_client_connect_info ci;
        memset(&ci, 0, sizeof(ci));
        ci.context = g.ctx;
        ci.address = g.host;
        ci.port = g.port;
        ci.path = path;
        ci.host = g.host;
        ci.origin = g.host;
        ci.protocol = NULL;
        ci.local_protocol_name = "ws_load";
        ci.userdata = c;
        ci.opaque_user_data = c;
        ci.pwsi = &c->wsi;
        c->st = C_CONNECTING;
        g.handshaking++;
        if (lws_client_connect_via_info(&ci) == NULL) {
            /* the CONNECTION_ERROR callback may already have counted it */
            if (c->st == C_CONNECTING) {
                c->st = C_FAILED;
                g.failed++;
                g.handshaking--;
            }
        }
    }
}

static void on_timer(lws_sorted_usec_list_t *sul)
{
    start_conns();
    int64_t now = mono_ms_();
    if (!g.ready_printed && now >= g.setup_deadline_ms)
        print_ready();
    check_ready();
    if (g.ready_printed && now - g.progress_ms >= 500 && g.messages != g.progress_printed) {
        g.progress_ms = now;
        g.progress_printed = g.messages;
        printf("{\"type\":\"progress\",\"messages\":%llu}\n", (unsigned long long)g.messages);
        fflush(stdout);
    }
    lws_sul_schedule(g.ctx, 0, &g.sul, on_timer, 20 * LWS_US_PER_MS);
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct conn *c = (struct conn *)lws_get_opaque_user_data(wsi);
    if (c == NULL)
        c = user;
    switch (reason) {
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
        if (c != NULL && c->st == C_CONNECTING) {
            c->st = C_FAILED;
            g.failed++;
            g.handshaking--;
        }
        check_ready();
        break;
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        if (c == NULL)
            break;
        g.handshaking--;
        g.connected++;
        c->st = C_OPEN;
        if (g.mode == M_PLAIN) {
            c->st = C_SUBSCRIBED;
            g.subscribed++;
        }
        check_ready();
        break;
    case LWS_CALLBACK_CLIENT_RECEIVE: {
        if (c == NULL)
            break;
        const char *m = in;
        size_t n = len;
        int final = lws_is_final_fragment(wsi);
        if (c->len > 0 || !final) {
            unsigned char *nb = realloc(c->buf, c->len + len + 1);
            if (nb == NULL)
                return -1;
            c->buf = nb;
            memcpy(c->buf + c->len, in, len);
            c->len += len;
            if (!final)
                break;
            m = (const char *)c->buf;
            n = c->len;
        }
        if (c->st == C_OPEN && g.mode != M_PLAIN && memmem(m, n, "\"connection\"", 12) &&
            memmem(m, n, "\"ready\"", 7)) {
            c->st = C_SUBSCRIBING;
            c->want_send = 1;
            lws_callback_on_writable(wsi);
        } else if (c->st == C_SUBSCRIBING && memmem(m, n, "\"type\":\"subscribe\"", 18)) {
            if (memmem(m, n, "\"success\"", 9)) {
                c->st = C_SUBSCRIBED;
                g.subscribed++;
            } else {
                c->st = C_FAILED;
                g.failed++;
                if (g.failed <= 3)
                    fprintf(stderr, "ws_load: subscribe refused: %.*s\n", (int)(n > 300 ? 300 : n),
                            m);
            }
            check_ready();
        } else {
            on_message(m, n);
        }
        c->len = 0;
        break;
    }
    case LWS_CALLBACK_CLIENT_WRITEABLE: {
        if (c == NULL || !c->want_send)
            break;
        c->want_send = 0;
        unsigned char buf[LWS_PRE + 1024];
        char *msg = (char *)buf + LWS_PRE;
        expand(msg, 1024, g.mode == M_OWN ? g.sub_own : g.sub_all, c->idx);
        size_t n = strlen(msg);
        if (lws_write(wsi, (unsigned char *)msg, n, LWS_WRITE_TEXT) < (int)n)
            return -1;
        break;
    }
    case LWS_CALLBACK_CLIENT_CLOSED:
        if (c != NULL) {
            if (c->st == C_CONNECTING)
                g.handshaking--;
            if (c->st != C_FAILED)
                g.closed++;
            if (c->st == C_SUBSCRIBED)
                g.subscribed--;
            c->st = C_CLOSED;
            free(c->buf);
            c->buf = NULL;
            c->len = 0;
            c->wsi = NULL;
        }
        check_ready();
        break;
    default:
        break;
    }
    return 0;
}

static void print_summary(void)
{
    double span = g.last_us > g.first_us ? (double)(g.last_us - g.first_us) / 1e6 : 0;
    printf("{\"type\":\"summary\",\"clients\":%d,\"connected\":%d,\"subscribed\":%d,"
           "\"failed\":%d,\"closed\":%d,\"messages\":%llu,\"snapshots\":%llu,\"firstMs\":%.3f,"
           "\"lastMs\":%.3f,\"spanS\":%.3f,\"rate\":%.1f,",
           g.clients, g.connected, g.subscribed, g.failed, g.closed,
           (unsigned long long)g.messages, (unsigned long long)g.snapshots, g.first_us / 1000.0,
           g.last_us / 1000.0, span, span > 0 ? (double)g.messages / span : 0.0);
    hist_print("origin", &g.origin);
    printf(",");
    hist_print("frame", &g.frame);
    printf("}\n");
    fflush(stdout);
}

static void on_sig(int s)
{
    if (s == SIGUSR1)
        reset_flag = 1;
    else if (s == SIGUSR2)
        dump_flag = 1;
    else
        stop_flag = 1;
}

static int usage(void)
{
    fputs("usage: ws_load [--clients N] [--mode relay-all|relay-own|plain] [--sub-all JSON] "
          "[--sub-own JSON] [--token T] [--prefix P] [--connect-batch N] [--seconds S] "
          "[--setup-seconds S] [--expect N] ws://HOST:PORT/PATH\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    double seconds = 120, setup_seconds = 60;
    g.clients = 100;
    g.batch = 256;
    g.token = "";
    g.prefix = "b";
    g.sub_all = "{\"type\":\"subscribe\",\"event\":\"request.status.updated\",\"token\":\"{token}\","
                "\"snapshotLimit\":0}";
    g.sub_own = "{\"type\":\"subscribe\",\"event\":\"request.status.updated\","
                "\"filters\":{\"id\":\"{id}\"}}";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--clients") && v)
            g.clients = atoi(v), i++;
        else if (!strcmp(a, "--mode") && v) {
            g.mode = !strcmp(v, "relay-own") ? M_OWN : !strcmp(v, "plain") ? M_PLAIN : M_ALL;
            i++;
        } else if (!strcmp(a, "--sub-all") && v)
            g.sub_all = v, i++;
        else if (!strcmp(a, "--sub-own") && v)
            g.sub_own = v, i++;
        else if (!strcmp(a, "--token") && v)
            g.token = v, i++;
        else if (!strcmp(a, "--prefix") && v)
            g.prefix = v, i++;
        else if (!strcmp(a, "--connect-batch") && v)
            g.batch = atoi(v), i++;
        else if (!strcmp(a, "--seconds") && v)
            seconds = atof(v), i++;
        else if (!strcmp(a, "--setup-seconds") && v)
            setup_seconds = atof(v), i++;
        else if (!strcmp(a, "--expect") && v)
            g.expect = strtoull(v, NULL, 10), i++;
        else if (a[0] == '-')
            return usage();
        else
            url = a;
    }
    static char hostbuf[256], pathbuf[512];
    int port = 0;
    if (url == NULL || g.clients < 1 || strlen(g.prefix) > 20 ||
        sscanf(url, "ws://%255[^:/]:%d%511s", hostbuf, &port, pathbuf) < 2)
        return usage();
    g.host = hostbuf;
    g.port = port;
    g.path = pathbuf[0] ? pathbuf : "/";

    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_sig);
    signal(SIGINT, on_sig);
    signal(SIGUSR1, on_sig);
    signal(SIGUSR2, on_sig);
    lws_set_log_level(LLL_ERR, NULL);
    g.c = calloc((size_t)g.clients, sizeof(*g.c));
    static const struct lws_protocols protos[] = {
        {"ws_load", callback, 0, 0, 0, NULL, 0},
        {NULL, NULL, 0, 0, 0, NULL, 0},
    };
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protos;
    info.fd_limit_per_thread = (unsigned)g.clients + 64;
    info.count_threads = 1;
    info.timeout_secs = 30;
    g.ctx = lws_create_context(&info);
    if (g.ctx == NULL) {
        fputs("ws_load: lws_create_context failed\n", stderr);
        return 1;
    }
    g.t0_ms = mono_ms_();
    g.deadline_ms = g.t0_ms + (int64_t)(seconds * 1000);
    g.setup_deadline_ms = g.t0_ms + (int64_t)(setup_seconds * 1000);
    lws_sul_schedule(g.ctx, 0, &g.sul, on_timer, 1);
    while (!stop_flag && mono_ms_() < g.deadline_ms) {
        if (reset_flag) {
            reset_flag = 0;
            g.messages = g.snapshots = 0;
            g.first_us = g.last_us = 0;
            memset(&g.origin, 0, sizeof(g.origin));
            memset(&g.frame, 0, sizeof(g.frame));
        }
        if (dump_flag) {
            dump_flag = 0;
            print_summary();
        }
        if (lws_service(g.ctx, 0) < 0)
            break;
    }
    print_summary();
    fflush(stdout);
    lws_context_destroy(g.ctx);
    free(g.c);
    return 0;
}
