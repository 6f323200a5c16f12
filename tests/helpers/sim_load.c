/* sim_load.c - measure how many websocket event frames a running simulator streams per second.
 *
 *   sim_load --url http://127.0.0.1:PORT [--rate N] [--seconds S] [--conns K] [--warmup S]
 *            [--no-start]
 *
 * Opens K plain websocket connections to the simulator (raw sockets: the client must not be
 * the bottleneck), starts its generator with POST /_sim/load {"rate":N,"durationMs":S*1000}
 * (unless --no-start), polls GET /_sim/requests?after=SEQ every 20 ms for the ids of new
 * requests and subscribes to each (round-robin over the connections), and counts the event
 * frames that arrive. Frames counted after the warm-up (default 1 s) until the generator
 * ends give the rate. Prints one JSON line:
 *   {"conns","rate","subscribed","frames","measuredFrames","seconds","framesPerSec","bytes"}
 * Exit status 0, 1 on a connection or protocol failure, 2 on bad usage.
 * runs on: its own single thread (blocking sends, poll() for reads). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64

struct wsconn {
    int fd;
    unsigned char *buf;
    size_t len, cap;
    int ready;
};

static char host[64] = "127.0.0.1";
static int port;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        perror("connect");
        exit(1);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            perror("send");
            exit(1);
        }
        c += w;
        n -= (size_t)w;
    }
}

/* One HTTP/1.0 request; returns the body (malloc) and the status in *status. */
static char *http(const char *method, const char *path, const char *body, int *status)
{
    int fd = dial();
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, host, port, body ? strlen(body) : 0, body ? body : "");
    send_all(fd, req, (size_t)n);
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            out = realloc(out, cap *= 2);
        ssize_t r = recv(fd, out + len, cap - len - 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    out[len] = '\0';
    *status = 0;
    sscanf(out, "HTTP/1.%*d %d", status);
    char *b = strstr(out, "\r\n\r\n");
    char *res = strdup(b ? b + 4 : "");
    free(out);
    return res;
}

static void ws_open(struct wsconn *c)
{
    c->fd = dial();
    char req[512];
    int n = snprintf(req, sizeof(req),
                     "GET / HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
                     host, port);
    send_all(c->fd, req, (size_t)n);
    char buf[4096];
    size_t len = 0;
    for (;;) {
        ssize_t r = recv(c->fd, buf + len, sizeof(buf) - len - 1, 0);
        if (r <= 0) {
            fprintf(stderr, "websocket handshake failed\n");
            exit(1);
        }
        len += (size_t)r;
        buf[len] = '\0';
        char *end = strstr(buf, "\r\n\r\n");
        if (end != NULL) {
            if (strncmp(buf, "HTTP/1.1 101", 12) != 0) {
                fprintf(stderr, "websocket upgrade refused: %.40s\n", buf);
                exit(1);
            }
            size_t rest = len - (size_t)(end + 4 - buf);
            c->cap = 1 << 20;
            c->buf = malloc(c->cap);
            memcpy(c->buf, end + 4, rest);
            c->len = rest;
            return;
        }
    }
}

static void ws_send_text(struct wsconn *c, const char *text)
{
    size_t n = strlen(text);
    unsigned char hdr[8];
    size_t h = 0;
    hdr[h++] = 0x81;
    if (n < 126) {
        hdr[h++] = (unsigned char)(0x80 | n);
    } else {
        hdr[h++] = 0x80 | 126;
        hdr[h++] = (unsigned char)(n >> 8);
        hdr[h++] = (unsigned char)n;
    }
    hdr[h++] = 0; /* a zero masking key: valid, and the payload goes as is */
    hdr[h++] = 0;
    hdr[h++] = 0;
    hdr[h++] = 0;
    char frame[512];
    memcpy(frame, hdr, h);
    memcpy(frame + h, text, n);
    send_all(c->fd, frame, h + n);
}

struct counts {
    uint64_t events, frames, bytes;
};

/* Parse complete frames from c->buf. Returns -1 on close. */
static int ws_parse(struct wsconn *c, struct counts *k)
{
    size_t off = 0;
    for (;;) {
        size_t avail = c->len - off;
        if (avail < 2)
            break;
        unsigned char *p = c->buf + off;
        int op = p[0] & 0x0f;
        uint64_t plen = p[1] & 0x7f;
        size_t h = 2;
        if (plen == 126) {
            if (avail < 4)
                break;
            plen = ((uint64_t)p[2] << 8) | p[3];
            h = 4;
        } else if (plen == 127) {
            if (avail < 10)
                break;
            plen = 0;
            for (int i = 0; i < 8; i++)
                plen = (plen << 8) | p[2 + i];
            h = 10;
        }
        if (avail < h + plen)
            break;
        const char *payload = (const char *)p + h;
        if (op == 8)
            return -1;
        if (op == 1 || op == 2) {
            k->frames++;
            k->bytes += plen;
            if (plen > 10 && memcmp(payload, "{\"event\":\"", 10) == 0)
                k->events++;
            else if (plen > 12 && memcmp(payload, "{\"type\":\"con", 12) == 0)
                c->ready = 1;
        }
        off += h + plen;
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return 0;
}

static void drain(struct wsconn *cs, int n, int timeout_ms, struct counts *k)
{
    struct pollfd pf[MAX_CONNS];
    for (int i = 0; i < n; i++)
        pf[i] = (struct pollfd){.fd = cs[i].fd, .events = POLLIN};
    if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
        return;
    for (int i = 0; i < n; i++) {
        if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        struct wsconn *c = &cs[i];
        if (c->cap - c->len < 65536)
            c->buf = realloc(c->buf, c->cap *= 2);
        ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
        if (r == 0) {
            fprintf(stderr, "connection %d closed by the simulator\n", i);
            exit(1);
        }
        if (r < 0)
            continue;
        c->len += (size_t)r;
        if (ws_parse(c, k) != 0) {
            fprintf(stderr, "connection %d got a close frame\n", i);
            exit(1);
        }
    }
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    int rate = 4000, conns = 4, start = 1;
    double seconds = 5, warmup = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--url") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc)
            rate = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--warmup") == 0 && i + 1 < argc)
            warmup = atof(argv[++i]);
        else if (strcmp(argv[i], "--conns") == 0 && i + 1 < argc)
            conns = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-start") == 0)
            start = 0;
        else {
            fprintf(stderr, "usage: sim_load --url http://127.0.0.1:PORT [--rate N] "
                            "[--seconds S] [--conns K] [--warmup S] [--no-start]\n");
            return 2;
        }
    }
    if (url == NULL || sscanf(url, "http://%63[^:]:%d", host, &port) != 2 || conns < 1 ||
        conns > MAX_CONNS || seconds <= warmup) {
        fprintf(stderr, "sim_load: need --url http://HOST:PORT, 1..64 conns, seconds > warmup\n");
        return 2;
    }
    struct wsconn cs[MAX_CONNS] = {{0}};
    struct counts k = {0};
    for (int i = 0; i < conns; i++) {
        ws_open(&cs[i]);
        ws_parse(&cs[i], &k); /* the greeting may have come with the handshake */
    }
    for (int64_t end = now_ms() + 3000;;) {
        int all = 1;
        for (int i = 0; i < conns; i++)
            all &= cs[i].ready;
        if (all)
            break;
        if (now_ms() > end) {
            fprintf(stderr, "no ready greeting\n");
            return 1;
        }
        drain(cs, conns, 50, &k);
    }
    int status;
    char body[128];
    uint64_t after = 0;
    if (start) {
        snprintf(body, sizeof(body), "{\"rate\":%d,\"durationMs\":%d}", rate, (int)(seconds * 1000));
        free(http("POST", "/_sim/load", body, &status));
        if (status != 200) {
            fprintf(stderr, "POST /_sim/load answered %d\n", status);
            return 1;
        }
    }
    int64_t t0 = now_ms(), tw = t0 + (int64_t)(warmup * 1000), tend = t0 + (int64_t)(seconds * 1000);
    uint64_t subscribed = 0, at_warm = 0, at_end = 0;
    int warm_done = 0, rr = 0;
    int64_t next_poll = t0;
    while (now_ms() < tend + 500) {
        int64_t now = now_ms();
        if (!warm_done && now >= tw) {
            at_warm = k.events;
            warm_done = 1;
        }
        if (now >= tend && at_end == 0)
            at_end = k.events;
        if (now >= next_poll && now < tend) {
            char path[128];
            snprintf(path, sizeof(path), "/_sim/requests?after=%llu&limit=10000",
                     (unsigned long long)after);
            char *b = http("GET", path, NULL, &status);
            json_t *j = json_loads(b, 0, NULL);
            free(b);
            json_t *list = json_object_get(j, "requests"), *r;
            size_t i;
            json_array_foreach(list, i, r) {
                char msg[300];
                snprintf(msg, sizeof(msg),
                         "{\"type\":\"subscribe\",\"event\":\"request.status.updated\","
                         "\"filters\":{\"id\":\"%s\"}}",
                         json_string_value(json_object_get(r, "id")));
                ws_send_text(&cs[rr++ % conns], msg);
                subscribed++;
            }
            if (json_object_get(j, "last"))
                after = (uint64_t)json_integer_value(json_object_get(j, "last"));
            json_decref(j);
            next_poll = now + 20;
        }
        drain(cs, conns, 5, &k);
    }
    if (at_end == 0)
        at_end = k.events;
    double secs = (double)(tend - tw) / 1000.0;
    printf("{\"conns\":%d,\"rate\":%d,\"subscribed\":%llu,\"frames\":%llu,\"measuredFrames\":%llu,"
           "\"seconds\":%.2f,\"framesPerSec\":%.0f,\"bytes\":%llu}\n",
           conns, rate, (unsigned long long)subscribed, (unsigned long long)k.events,
           (unsigned long long)(at_end - at_warm), secs, (double)(at_end - at_warm) / secs,
           (unsigned long long)k.bytes);
    for (int i = 0; i < conns; i++) {
        close(cs[i].fd);
        free(cs[i].buf);
    }
    return 0;
}
