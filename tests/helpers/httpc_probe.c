/* httpc_probe.c - drive relay/httpc on its own event_base from the command line.
 *
 *   httpc_probe [options] METHOD URL [BODY]
 *     --concurrency N        requests in flight at once (default 1)
 *     --count N              requests in total (default 1)
 *     --timeout-ms N         total timeout per request (default httpc's 10000)
 *     --connect-timeout-ms N connect timeout (default httpc's 5000)
 *     --max-response N       body bytes kept (default httpc's 1 MiB)
 *     --max-drain N          bytes read and discarded beyond that (default 0)
 *     --max-conns N          httpc max_total_conns (default 0: unlimited)
 *     --max-host-conns N     httpc max_host_conns (default 0: unlimited)
 *     --forbid-loopback      addr_check refusing loopback addresses (127/8, ::1, mapped)
 *     --forbid-loopback-from I  the same, only for requests with index >= I (earlier ones
 *                            open keep-alive connections without a check)
 *     --insecure             do not verify TLS certificates
 *     --header "Name: v"     extra request header (repeatable)
 *     --url URL              another URL; requests rotate over URL and every --url in order
 *     --print-body           add "body" (JSON string) to each line
 *     --quiet                only the summary line
 *     --abort-after-ms N     httpc_free after N ms (requests in flight end with "shutdown")
 *     --free-after N         httpc_free from inside the Nth completion callback
 *
 * Prints one JSON line per completed request, in completion order:
 *   {"i","url","status","err","bodyLen","latencyMs","retryAfterMs","truncated","httpVersion"}
 * (plus "detail" on a transport error, "body" with --print-body), then a summary line
 * {"summary":true,"count","ok","errors":{"timeout":n,...},"elapsedMs","rps","p50Ms","p99Ms",
 * "maxMs","connects","failedStart","waited","peakInCurl"} (waited: requests that waited in httpc
 * for a connection slot; peakInCurl: most transfers in curl at once). Exit status 0 when every request completed (or was
 * ended by --abort-after-ms / --free-after), 2 on a usage error, 1 when httpc_request
 * refused a request. The base uses EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST (see httpc.c).
 * runs on: its own thread (single-threaded tool). */
#include "protocol/addr.h"
#include "relay/common/httpc.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 32
#define MAX_URLS 32

struct probe {
    struct event_base *base;
    struct httpc *h;
    struct httpc_req req;
    const char *urls[MAX_URLS];
    int n_urls;
    long count, started, done, ok, failed_start;
    long free_after;
    long check_from; /* requests with index >= check_from get forbid_loopback; -1: none */
    int quiet, print_body, freed;
    struct httpc_stats st; /* taken just before httpc_free */
    int64_t t0;
    int64_t *lat;          /* latency of each completion */
    unsigned char *err_of; /* outcome of each completion */
};

static int forbid_loopback(void *arg, const struct sockaddr *sa, socklen_t len)
{
    return proto_addr_forbidden(sa, len) == PROTO_ADDR_LOOPBACK;
}

static void put_json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

struct slot {
    struct probe *p;
    long i; /* request index: picks the URL */
};

static int start(struct probe *p, struct slot *s);

static void on_done(void *arg, const struct httpc_resp *r)
{
    struct slot *s = arg;
    struct probe *p = s->p;
    const char *url = p->urls[s->i % p->n_urls];

    int outcome = 0;
    if (r->err != NULL)
        for (outcome = HTTPC_OUTCOME_COUNT - 1; outcome > 0; outcome--)
            if (strcmp(httpc_outcome_name(outcome), r->err) == 0)
                break;
    p->err_of[p->done] = (unsigned char)outcome;
    p->lat[p->done++] = r->latency_ms;
    if (r->err == NULL)
        p->ok++;
    if (!p->quiet) {
        printf("{\"i\":%ld,\"url\":", s->i);
        put_json_str(stdout, url, strlen(url));
        printf(",\"status\":%ld,\"err\":", r->status);
        if (r->err != NULL)
            printf("\"%s\"", r->err);
        else
            fputs("null", stdout);
        printf(",\"bodyLen\":%zu,\"latencyMs\":%lld,\"retryAfterMs\":%lld,\"truncated\":%s,"
               "\"httpVersion\":%d",
               r->body_len, (long long)r->latency_ms, (long long)r->retry_after_ms,
               r->truncated ? "true" : "false", r->http_version);
        if (r->detail != NULL) {
            fputs(",\"detail\":", stdout);
            put_json_str(stdout, r->detail, strlen(r->detail));
        }
        if (p->print_body) {
            fputs(",\"body\":", stdout);
            put_json_str(stdout, r->body, r->body_len);
        }
        fputs("}\n", stdout);
    }
    if (p->free_after > 0 && p->done == p->free_after && !p->freed) {
        p->freed = 1;
        httpc_stats(p->h, &p->st);
        httpc_free(p->h); /* from inside a callback: the others complete now, "shutdown" */
        free(s);
        event_base_loopbreak(p->base);
        return;
    }
    if (p->started < p->count && !p->freed) {
        s->i = p->started; /* reuse the slot; httpc allows starting from the callback */
        if (start(p, s) != 0) {
            free(s);
            event_base_loopbreak(p->base);
        }
    } else {
        free(s);
    }
    if (p->done == p->count)
        event_base_loopbreak(p->base);
}

static void on_abort(evutil_socket_t fd, short what, void *arg)
{
    struct probe *p = arg;
    p->freed = 1;
    httpc_stats(p->h, &p->st);
    httpc_free(p->h);
    event_base_loopbreak(p->base);
}

static int start(struct probe *p, struct slot *s)
{
    p->req.url = p->urls[s->i % p->n_urls];
    p->req.addr_check = p->check_from >= 0 && s->i >= p->check_from ? forbid_loopback : NULL;
    p->started++;
    if (httpc_request(p->h, &p->req, on_done, s) != 0) {
        p->failed_start++;
        return -1;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    fputs("usage: httpc_probe [--concurrency N] [--count N] [--timeout-ms N] "
          "[--connect-timeout-ms N] [--max-response N] [--max-drain N] [--max-conns N] "
          "[--max-host-conns N] [--forbid-loopback] [--forbid-loopback-from I] [--insecure] "
          "[--header H]... [--url U]... "
          "[--print-body] [--quiet] [--abort-after-ms N] [--free-after N] METHOD URL [BODY]\n",
          stderr);
    exit(2);
}

int main(int argc, char **argv)
{
    static char outbuf[1 << 20];
    struct probe p;
    struct httpc_opts o;
    const char *headers[MAX_HEADERS + 1];
    const char *extra[MAX_URLS];
    int n_headers = 0, n_extra = 0;
    long concurrency = 1;
    long abort_after_ms = 0;
    const char *pos[3];
    int n_pos = 0;

    memset(&p, 0, sizeof(p));
    memset(&o, 0, sizeof(o));
    p.count = 1;
    p.check_from = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NUMOPT(name, dst)                                                                         \
    if (strcmp(a, name) == 0) {                                                                   \
        if (v == NULL)                                                                            \
            usage();                                                                              \
        dst = strtoll(v, NULL, 10);                                                               \
        i++;                                                                                      \
        continue;                                                                                 \
    }
        NUMOPT("--concurrency", concurrency)
        NUMOPT("--count", p.count)
        NUMOPT("--timeout-ms", p.req.total_timeout_ms)
        NUMOPT("--connect-timeout-ms", p.req.connect_timeout_ms)
        NUMOPT("--max-response", p.req.max_response)
        NUMOPT("--max-drain", p.req.max_drain)
        NUMOPT("--max-conns", o.max_total_conns)
        NUMOPT("--max-host-conns", o.max_host_conns)
        NUMOPT("--abort-after-ms", abort_after_ms)
        NUMOPT("--free-after", p.free_after)
        NUMOPT("--forbid-loopback-from", p.check_from)
#undef NUMOPT
        if (strcmp(a, "--forbid-loopback") == 0) {
            p.check_from = 0;
        } else if (strcmp(a, "--insecure") == 0) {
            p.req.tls_insecure = 1;
        } else if (strcmp(a, "--quiet") == 0) {
            p.quiet = 1;
        } else if (strcmp(a, "--print-body") == 0) {
            p.print_body = 1;
        } else if (strcmp(a, "--header") == 0 || strcmp(a, "-H") == 0) {
            if (v == NULL || n_headers == MAX_HEADERS)
                usage();
            headers[n_headers++] = v;
            i++;
        } else if (strcmp(a, "--url") == 0) {
            if (v == NULL || n_extra == MAX_URLS - 1)
                usage();
            extra[n_extra++] = v;
            i++;
        } else if (a[0] == '-' && a[1] == '-') {
            usage();
        } else {
            if (n_pos == 3)
                usage();
            pos[n_pos++] = a;
        }
    }
    if (n_pos < 2 || concurrency < 1 || p.count < 1)
        usage();
    headers[n_headers] = NULL;
    p.req.method = pos[0];
    p.urls[p.n_urls++] = pos[1];
    for (int i = 0; i < n_extra; i++)
        p.urls[p.n_urls++] = extra[i];
    if (n_pos == 3) {
        p.req.body = pos[2];
        p.req.body_len = strlen(pos[2]);
    }
    p.req.headers = n_headers > 0 ? headers : NULL;
    if (concurrency > p.count)
        concurrency = p.count;

    setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
    p.lat = xcalloc((size_t)p.count, sizeof(*p.lat));
    p.err_of = xcalloc((size_t)p.count, 1);
    /* The changelist folds the epoll_ctl del+add that curl's REMOVE-then-watch of a reused
     * keep-alive socket causes within one loop pass (the daemon can do the same). */
    struct event_config *cfg = event_config_new();
    if (cfg != NULL) {
        event_config_set_flag(cfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
        p.base = event_base_new_with_config(cfg);
        event_config_free(cfg);
    }
    o.user_agent = "httpc_probe";
    if (p.base == NULL || (p.h = httpc_new(p.base, &o)) == NULL) {
        fputs("httpc_probe: cannot create the event base or httpc\n", stderr);
        return 1;
    }
    p.t0 = mono_ms();
    for (long i = 0; i < concurrency; i++) {
        struct slot *s = xmalloc(sizeof(*s));
        s->p = &p;
        s->i = p.started;
        if (start(&p, s) != 0) {
            free(s);
            break;
        }
    }
    struct event *abort_ev = evtimer_new(p.base, on_abort, &p);
    if (abort_after_ms > 0) {
        struct timeval tv = { abort_after_ms / 1000, (abort_after_ms % 1000) * 1000 };
        evtimer_add(abort_ev, &tv);
    }
    if (p.failed_start == 0)
        event_base_dispatch(p.base);
    int64_t elapsed = mono_ms() - p.t0;

    if (!p.freed) {
        httpc_stats(p.h, &p.st);
        httpc_free(p.h);
    }
    struct httpc_stats st = p.st;
    event_free(abort_ev);
    event_base_free(p.base);

    qsort(p.lat, (size_t)p.done, sizeof(*p.lat), cmp_i64);
    int64_t p50 = p.done ? p.lat[(p.done - 1) / 2] : 0;
    int64_t p99 = p.done ? p.lat[(p.done - 1) * 99 / 100] : 0;
    int64_t max = p.done ? p.lat[p.done - 1] : 0;
    printf("{\"summary\":true,\"count\":%ld,\"ok\":%ld,\"errors\":{", p.done, p.ok);
    int first = 1;
    long by_err[HTTPC_OUTCOME_COUNT] = { 0 };
    for (long k = 0; k < p.done; k++)
        by_err[p.err_of[k]]++;
    for (int k = 1; k < HTTPC_OUTCOME_COUNT; k++) {
        if (by_err[k] == 0)
            continue;
        printf("%s\"%s\":%ld", first ? "" : ",", httpc_outcome_name(k), by_err[k]);
        first = 0;
    }
    printf("},\"elapsedMs\":%lld,\"rps\":%.0f,\"p50Ms\":%lld,\"p99Ms\":%lld,\"maxMs\":%lld,"
           "\"connects\":%llu,\"failedStart\":%ld,\"waited\":%llu,\"peakInCurl\":%llu}\n",
           (long long)elapsed, elapsed > 0 ? (double)p.done * 1000.0 / (double)elapsed : 0.0,
           (long long)p50, (long long)p99, (long long)max, (unsigned long long)st.connects,
           p.failed_start, (unsigned long long)st.waited, (unsigned long long)st.peak_curl);
    fflush(stdout);
    free(p.lat);
    free(p.err_of);
    return p.failed_start ? 1 : 0;
}
