/* hook_receiver.c - a small fast webhook receiver for tests and benchmarks (libevent evhttp,
 * HTTP/1.1 keep-alive, one thread).
 *
 *   hook_receiver [options]
 *     --host H           listen address (default 127.0.0.1)
 *     --port N           listen port (default 0: any free port)
 *     --script "/a=500,500,200"   per-path answers, consumed in order, then --default
 *                        (repeatable). An answer is a status ("503"), a status with a
 *                        Retry-After in seconds ("429:2"), or "hang" (never answer)
 *     --default N        status once a path's script is used up (default 204)
 *     --delay-ms N       wait this long before every answer
 *     --delay "/p=ms"    per-path delay (repeatable)
 *     --out FILE         record requests as JSON lines here (default: stdout)
 *     --minimal          record only {"t","path","id"} (benchmarks)
 *     --no-record        record nothing (benchmarks)
 *
 * Prints {"port":N} as its first line on stdout once listening. Each request becomes one
 * JSON line: {"t": arrival ms, "path", "id": webhook-id, "ts": webhook-timestamp, "status":
 * answered, "headers": {lower-case name: value}, "body": raw body as a JSON string}.
 * Records are flushed every 20 ms. Control: POST /__script with body "/a=200,500" replaces
 * a path's script; GET /__stats answers {"requests": n}.
 * runs on: its own single thread. */
#include <ctype.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#define MAX_PATHS 512
#define MAX_STEPS 64

struct step {
    int status;      /* 0 = hang */
    int retry_after; /* seconds, -1 none */
};

struct path_script {
    char path[256];
    struct step steps[MAX_STEPS];
    int n, next;
    int delay_ms; /* -1 = global */
};

struct rx {
    struct event_base *base;
    struct path_script paths[MAX_PATHS];
    int npaths;
    int def_status;
    int delay_ms;
    FILE *out;
    int minimal, no_record;
    uint64_t requests;
    struct event *flush_ev;
};

struct pending_reply {
    struct evhttp_request *req;
    int status, retry_after;
    struct event *ev;
};

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static struct path_script *find_path(struct rx *rx, const char *path, int create)
{
    for (int i = 0; i < rx->npaths; i++)
        if (strcmp(rx->paths[i].path, path) == 0)
            return &rx->paths[i];
    if (!create || rx->npaths == MAX_PATHS)
        return NULL;
    struct path_script *p = &rx->paths[rx->npaths++];
    memset(p, 0, sizeof(*p));
    snprintf(p->path, sizeof(p->path), "%s", path);
    p->delay_ms = -1;
    return p;
}

/* "/a=500,429:2,hang,200": replaces the path's steps. Returns 0 or -1. */
static int parse_script(struct rx *rx, const char *spec)
{
    const char *eq = strchr(spec, '=');
    if (eq == NULL || eq == spec || (size_t)(eq - spec) >= 256)
        return -1;
    char path[256];
    memcpy(path, spec, (size_t)(eq - spec));
    path[eq - spec] = '\0';
    struct path_script *p = find_path(rx, path, 1);
    if (p == NULL)
        return -1;
    p->n = 0;
    p->next = 0;
    const char *s = eq + 1;
    while (*s && p->n < MAX_STEPS) {
        struct step st = {0, -1};
        if (strncmp(s, "hang", 4) == 0) {
            s += 4;
        } else {
            char *end;
            st.status = (int)strtol(s, &end, 10);
            if (end == s || st.status < 100 || st.status > 599)
                return -1;
            s = end;
            if (*s == ':') {
                st.retry_after = (int)strtol(s + 1, &end, 10);
                s = end;
            }
        }
        p->steps[p->n++] = st;
        if (*s == ',')
            s++;
        else if (*s && !isspace((unsigned char)*s))
            return -1;
        else
            break;
    }
    return 0;
}

static void put_json(struct evbuffer *b, const char *s, size_t n)
{
    evbuffer_add(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c < 0x20) {
            if (i > run)
                evbuffer_add(b, s + run, i - run);
            if (c == '"' || c == '\\')
                evbuffer_add_printf(b, "\\%c", c);
            else
                evbuffer_add_printf(b, "\\u%04x", c);
            run = i + 1;
        }
    }
    if (n > run)
        evbuffer_add(b, s + run, n - run);
    evbuffer_add(b, "\"", 1);
}

static void record(struct rx *rx, struct evhttp_request *req, const char *path, int status)
{
    if (rx->no_record)
        return;
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *id = evhttp_find_header(h, "webhook-id");
    struct evbuffer *b = evbuffer_new();
    evbuffer_add_printf(b, "{\"t\":%lld,\"path\":", (long long)now_ms());
    put_json(b, path, strlen(path));
    evbuffer_add(b, ",\"id\":", 6);
    put_json(b, id ? id : "", id ? strlen(id) : 0);
    if (!rx->minimal) {
        const char *ts = evhttp_find_header(h, "webhook-timestamp");
        evbuffer_add(b, ",\"ts\":", 6);
        put_json(b, ts ? ts : "", ts ? strlen(ts) : 0);
        evbuffer_add_printf(b, ",\"status\":%d,\"headers\":{", status);
        int first = 1;
        for (struct evkeyval *kv = h->tqh_first; kv; kv = kv->next.tqe_next) {
            char name[256];
            size_t n = strlen(kv->key);
            if (n >= sizeof(name))
                continue;
            for (size_t i = 0; i <= n; i++)
                name[i] = (char)tolower((unsigned char)kv->key[i]);
            if (!first)
                evbuffer_add(b, ",", 1);
            first = 0;
            put_json(b, name, n);
            evbuffer_add(b, ":", 1);
            put_json(b, kv->value, strlen(kv->value));
        }
        evbuffer_add(b, "},\"body\":", 9);
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        const char *body = len ? (const char *)evbuffer_pullup(in, -1) : "";
        put_json(b, body, len);
    }
    evbuffer_add(b, "}\n", 2);
    size_t len = evbuffer_get_length(b);
    fwrite(evbuffer_pullup(b, -1), 1, len, rx->out);
    evbuffer_free(b);
}

static void send_status(struct evhttp_request *req, int status, int retry_after)
{
    if (retry_after >= 0) {
        char v[24];
        snprintf(v, sizeof(v), "%d", retry_after);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", v);
    }
    struct evbuffer *b = NULL;
    if (status != 204 && status != 304) {
        b = evbuffer_new();
        evbuffer_add_printf(b, "{\"received\":true,\"status\":%d}", status);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/json");
    }
    if (status >= 300 && status < 400)
        evhttp_add_header(evhttp_request_get_output_headers(req), "Location",
                          "http://127.0.0.1:9/elsewhere");
    evhttp_send_reply(req, status, NULL, b);
    if (b)
        evbuffer_free(b);
}

static void on_delayed(evutil_socket_t fd, short what, void *arg)
{
    struct pending_reply *p = arg;
    send_status(p->req, p->status, p->retry_after);
    event_free(p->ev);
    free(p);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct rx *rx = arg;
    const char *uri = evhttp_request_get_uri(req);
    char path[256];
    size_t n = strcspn(uri, "?");
    if (n >= sizeof(path))
        n = sizeof(path) - 1;
    memcpy(path, uri, n);
    path[n] = '\0';
    if (strcmp(path, "/__script") == 0) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        char spec[4096];
        if (len >= sizeof(spec))
            len = sizeof(spec) - 1;
        evbuffer_remove(in, spec, len);
        spec[len] = '\0';
        send_status(req, parse_script(rx, spec) == 0 ? 200 : 400, -1);
        return;
    }
    if (strcmp(path, "/__stats") == 0) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "{\"requests\":%llu}", (unsigned long long)rx->requests);
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
        return;
    }
    rx->requests++;
    struct path_script *p = find_path(rx, path, 0);
    struct step st = {rx->def_status, -1};
    if (p && p->next < p->n)
        st = p->steps[p->next++];
    record(rx, req, path, st.status);
    if (st.status == 0)
        return; /* hang: the request stays open until the client gives up */
    int delay = p && p->delay_ms >= 0 ? p->delay_ms : rx->delay_ms;
    if (delay > 0) {
        struct pending_reply *pr = calloc(1, sizeof(*pr));
        pr->req = req;
        pr->status = st.status;
        pr->retry_after = st.retry_after;
        pr->ev = evtimer_new(rx->base, on_delayed, pr);
        struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
        evtimer_add(pr->ev, &tv);
        return;
    }
    send_status(req, st.status, st.retry_after);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    fflush(((struct rx *)arg)->out);
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    struct rx *rx = arg;
    fflush(rx->out);
    event_base_loopexit(rx->base, NULL);
}

int main(int argc, char **argv)
{
    static struct rx rx;
    const char *host = "127.0.0.1", *out = NULL;
    int port = 0;
    rx.def_status = 204;
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--host") && v)
            host = v, i++;
        else if (!strcmp(a, "--port") && v)
            port = atoi(v), i++;
        else if (!strcmp(a, "--default") && v)
            rx.def_status = atoi(v), i++;
        else if (!strcmp(a, "--delay-ms") && v)
            rx.delay_ms = atoi(v), i++;
        else if (!strcmp(a, "--out") && v)
            out = v, i++;
        else if (!strcmp(a, "--minimal"))
            rx.minimal = 1;
        else if (!strcmp(a, "--no-record"))
            rx.no_record = 1;
        else if (!strcmp(a, "--script") && v) {
            if (parse_script(&rx, v) != 0) {
                fprintf(stderr, "hook_receiver: bad --script %s\n", v);
                return 2;
            }
            i++;
        } else if (!strcmp(a, "--delay") && v) {
            const char *eq = strchr(v, '=');
            char path[256];
            if (eq == NULL || (size_t)(eq - v) >= sizeof(path)) {
                fprintf(stderr, "hook_receiver: bad --delay %s\n", v);
                return 2;
            }
            memcpy(path, v, (size_t)(eq - v));
            path[eq - v] = '\0';
            struct path_script *p = find_path(&rx, path, 1);
            p->delay_ms = atoi(eq + 1);
            i++;
        } else {
            fprintf(stderr, "usage: hook_receiver [--host H] [--port N] [--script /p=500,200] "
                            "[--default N] [--delay-ms N] [--delay /p=ms] [--out FILE] "
                            "[--minimal] [--no-record]\n");
            return 2;
        }
    }
    rx.out = out ? fopen(out, "a") : stdout;
    if (rx.out == NULL) {
        perror("hook_receiver: --out");
        return 2;
    }
    setvbuf(rx.out, NULL, _IOFBF, 1 << 20);
    rx.base = event_base_new();
    struct evhttp *http = evhttp_new(rx.base);
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                         EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE);
    evhttp_set_timeout(http, 120);
    evhttp_set_gencb(http, on_request, &rx);
    struct evhttp_bound_socket *s = evhttp_bind_socket_with_handle(http, host, (uint16_t)port);
    if (s == NULL) {
        fprintf(stderr, "hook_receiver: cannot listen on %s:%d\n", host, port);
        return 1;
    }
    struct sockaddr_storage ss;
    ev_socklen_t sl = sizeof(ss);
    getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &sl);
    int bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    printf("{\"port\":%d}\n", bound);
    fflush(stdout);
    rx.flush_ev = event_new(rx.base, -1, EV_PERSIST, on_flush, &rx);
    struct timeval ft = {0, 20000};
    event_add(rx.flush_ev, &ft);
    struct event *sig = evsignal_new(rx.base, SIGTERM, on_signal, &rx);
    struct event *sigi = evsignal_new(rx.base, SIGINT, on_signal, &rx);
    event_add(sig, NULL);
    event_add(sigi, NULL);
    event_base_dispatch(rx.base);
    fflush(rx.out);
    event_free(sig);
    event_free(sigi);
    event_free(rx.flush_ev);
    evhttp_free(http);
    event_base_free(rx.base);
    return 0;
}
