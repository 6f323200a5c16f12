/* ws_relay_probe.c - drives the ws thread (relay/edge/ws_thread.c) with real queues, the core side
 * simulated by this program's main thread, for tests/integration/upstream_ws.test.mjs.
 *
 *   ws_relay_probe [options] UPSTREAM_URL [REQUEST_ID...]
 *     --seconds N            exit after N seconds (default: until SIGTERM / SIGINT)
 *     --listen HOST:PORT     also run the dashboard server (port 0: any free port)
 *     --api-key KEY          sent as ?apiKey=
 *     --ping-interval MS     (default 15000)     --ping-timeout MS (default 30000)
 *     --connect-timeout MS   (default 10000)     --queue-max N (dashboard outbox)
 *     --log-level LEVEL      error|warn|info|debug (logs go to stderr)
 *
 * It pushes XMSG_UP_START, and on every READY one subscribe frame per REQUEST_ID. Every
 * message from the ws thread becomes one JSON line on stdout:
 *   {"type":"listening","port":N}
 *   {"type":"ready","gen":1,"socket":"..."}   {"type":"frame","gen":1,"data":"..."}
 *   {"type":"down","gen":1,"code":1012,"reason":"..."}
 *   {"type":"dash_open","session":1,"peer":"..."}  {"type":"dash_msg","session":1,"data":"..."}
 *   {"type":"dash_gone","session":1}   {"type":"stats",...}   {"type":"exit"}
 * As the dashboard's "core" it answers each dashboard message with "echo:<message>";
 * "close-me" gets XMSG_DASH_CLOSE 4001 "bye"; "flood N" gets N frames at once.
 * Commands on stdin, one per line: start | stop | reconnect | send TEXT (current gen) |
 * send-gen GEN TEXT | stats.
 * Exit status: 0 after a signal or --seconds, 1 when the ws thread does not start, 2 usage. */
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/ws_thread.h"
#include "relay/edge/xq.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cmd {
    struct cmd *next;
    char line[];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int woken, got_signal;
static struct cmd *cmds_head, **cmds_tail = &cmds_head;

static struct xq *to_ws, *to_core;
static uint64_t ready_gen;
static char **ids;
static int nids;

static void wake_main(void *arg)
{
    pthread_mutex_lock(&mu);
    woken = 1;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mu);
}

static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    int sig = 0;
    sigwait(set, &sig);
    pthread_mutex_lock(&mu);
    got_signal = sig;
    pthread_cond_signal(&cond);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void *stdin_thread(void *arg)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        struct cmd *c = xmalloc(sizeof(*c) + (size_t)n + 1);
        memcpy(c->line, line, (size_t)n + 1);
        c->next = NULL;
        pthread_mutex_lock(&mu);
        *cmds_tail = c;
        cmds_tail = &c->next;
        pthread_cond_signal(&cond);
        pthread_mutex_unlock(&mu);
    }
    free(line);
    return NULL;
}

static void emit(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (s != NULL) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
    free(s);
    json_decref(j);
}

/* data as a JSON string, or null when it is not UTF-8 */
static json_t *text(const struct xmsg *m)
{
    json_t *s = json_stringn((const char *)m->data, m->len);
    return s ? s : json_null();
}

static void send_text(uint64_t gen, const char *s)
{
    struct xmsg *m = xmsg_new(XMSG_UP_SEND, 0, s, strlen(s));
    m->gen = gen;
    xq_push(to_ws, m);
}

static void subscribe_all(uint64_t gen)
{
    for (int i = 0; i < nids; i++) {
        json_t *j = json_pack("{s:s,s:s,s:{s:s}}", "type", "subscribe", "event",
                              "request.status.updated", "filters", "id", ids[i]);
        char *s = json_dumps(j, JSON_COMPACT);
        send_text(gen, s);
        free(s);
        json_decref(j);
    }
}

static void dash_answer(const struct xmsg *m)
{
    const char *d = (const char *)m->data;
    if (strcmp(d, "close-me") == 0) {
        struct xmsg *c = xmsg_new(XMSG_DASH_CLOSE, m->session, "bye", 3);
        c->code = 4001;
        xq_push(to_ws, c);
    } else if (strncmp(d, "flood ", 6) == 0) {
        int n = atoi(d + 6);
        for (int i = 0; i < n; i++) {
            char buf[32];
            int k = snprintf(buf, sizeof(buf), "flood:%d", i);
            xq_push(to_ws, xmsg_new(XMSG_DASH_SEND, m->session, buf, (size_t)k));
        }
    } else {
        char *s = xasprintf("echo:%s", d);
        xq_push(to_ws, xmsg_new(XMSG_DASH_SEND, m->session, s, strlen(s)));
        free(s);
    }
}

static void on_msg(const struct xmsg *m)
{
    json_int_t gen = (json_int_t)m->gen, sess = (json_int_t)m->session;
    switch (m->type) {
    case XMSG_UP_READY:
        ready_gen = m->gen;
        emit(json_pack("{s:s,s:I,s:o}", "type", "ready", "gen", gen, "socket", text(m)));
        subscribe_all(m->gen);
        break;
    case XMSG_UP_FRAME:
        emit(json_pack("{s:s,s:I,s:o}", "type", "frame", "gen", gen, "data", text(m)));
        break;
    case XMSG_UP_DOWN:
        emit(json_pack("{s:s,s:I,s:i,s:o}", "type", "down", "gen", gen, "code", m->code,
                       "reason", text(m)));
        break;
    case XMSG_DASH_OPEN:
        emit(json_pack("{s:s,s:I,s:o}", "type", "dash_open", "session", sess, "peer", text(m)));
        break;
    case XMSG_DASH_MSG:
        emit(json_pack("{s:s,s:I,s:o}", "type", "dash_msg", "session", sess, "data", text(m)));
        dash_answer(m);
        break;
    case XMSG_DASH_GONE:
        emit(json_pack("{s:s,s:I}", "type", "dash_gone", "session", sess));
        break;
    default:
        emit(json_pack("{s:s,s:i}", "type", "unexpected", "xmsg", (int)m->type));
        break;
    }
}

static void emit_stats(struct ws_thread *t)
{
    struct ws_thread_stats st;
    ws_thread_stats(t, &st);
    emit(json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
                   "type", "stats", "state", upstream_ws_state_name(st.up.state), "gen",
                   (json_int_t)st.up.gen, "attempts", (json_int_t)st.up.attempts,
                   "reconnects", (json_int_t)st.up.reconnects, "readies",
                   (json_int_t)st.up.readies, "downs", (json_int_t)st.up.downs,
                   "ping_timeouts", (json_int_t)st.up.ping_timeouts, "connect_timeouts",
                   (json_int_t)st.up.connect_timeouts, "frames_in",
                   (json_int_t)st.up.frames_in, "frames_out", (json_int_t)st.up.frames_out,
                   "dropped_oversize", (json_int_t)st.up.dropped_oversize, "dropped_sends",
                   (json_int_t)st.up.dropped_sends, "dash_opened", (json_int_t)st.dash.opened,
                   "dash_closed", (json_int_t)st.dash.closed, "dash_frames_out",
                   (json_int_t)st.dash.frames_out, "dash_slow_closed",
                   (json_int_t)st.dash.slow_closed));
}

static void on_cmd(struct ws_thread *t, const char *line)
{
    if (strcmp(line, "start") == 0) {
        xq_push(to_ws, xmsg_new(XMSG_UP_START, 0, NULL, 0));
    } else if (strcmp(line, "stop") == 0) {
        xq_push(to_ws, xmsg_new(XMSG_UP_STOP, 0, NULL, 0));
    } else if (strcmp(line, "reconnect") == 0) {
        xq_push(to_ws, xmsg_new(XMSG_UP_RECONNECT, 0, NULL, 0));
    } else if (strncmp(line, "send ", 5) == 0) {
        send_text(ready_gen, line + 5);
    } else if (strncmp(line, "send-gen ", 9) == 0) {
        char *rest;
        unsigned long long g = strtoull(line + 9, &rest, 10);
        send_text(g, *rest == ' ' ? rest + 1 : rest);
    } else if (strcmp(line, "stats") == 0) {
        emit_stats(t);
    } else if (line[0] != '\0') {
        emit(json_pack("{s:s,s:s}", "type", "error", "unknown_command", line));
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: ws_relay_probe [--seconds N] [--listen HOST:PORT] [--api-key KEY] "
                    "[--ping-interval MS] [--ping-timeout MS] [--connect-timeout MS] "
                    "[--queue-max N] [--log-level L] URL [ID...]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct ws_thread_opts o = {.ping_interval_ms = 15000, .ping_timeout_ms = 30000};
    double seconds = 0;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL)
            return usage();
        i++;
        if (strcmp(f, "--seconds") == 0)
            seconds = atof(v);
        else if (strcmp(f, "--listen") == 0)
            o.listen = v;
        else if (strcmp(f, "--api-key") == 0)
            o.api_key = v;
        else if (strcmp(f, "--ping-interval") == 0)
            o.ping_interval_ms = atoll(v);
        else if (strcmp(f, "--ping-timeout") == 0)
            o.ping_timeout_ms = atoll(v);
        else if (strcmp(f, "--connect-timeout") == 0)
            o.connect_timeout_ms = atoll(v);
        else if (strcmp(f, "--queue-max") == 0)
            o.dash_queue_max = atoll(v);
        else if (strcmp(f, "--log-level") == 0 && log_level_parse(v) >= 0)
            log_set_level(log_level_parse(v));
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    o.upstream_url = argv[i++];
    ids = argv + i;
    nids = argc - i;
    log_thread_name("core");

    /* signals go to one sigwait thread; every other thread (ws included) blocks them */
    static sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t sig_tid, in_tid;
    pthread_create(&sig_tid, NULL, signal_thread, &set);
    pthread_create(&in_tid, NULL, stdin_thread, NULL);
    pthread_detach(in_tid);

    to_core = xq_new(wake_main, NULL);
    to_ws = xq_new(NULL, NULL);
    o.to_ws = to_ws;
    o.to_core = to_core;
    struct ws_thread *t = ws_thread_start(&o);
    if (t == NULL) {
        emit(json_pack("{s:s}", "type", "start_failed"));
        pthread_kill(sig_tid, SIGTERM);
        pthread_join(sig_tid, NULL);
        xq_free(to_core);
        xq_free(to_ws);
        return 1;
    }
    if (o.listen != NULL)
        emit(json_pack("{s:s,s:i}", "type", "listening", "port", ws_thread_dash_port(t)));
    xq_push(to_ws, xmsg_new(XMSG_UP_START, 0, NULL, 0));

    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += (time_t)seconds;
    end.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!woken && cmds_head == NULL && !got_signal) {
            if (seconds > 0) {
                if (pthread_cond_timedwait(&cond, &mu, &end) != 0)
                    break;
            } else {
                pthread_cond_wait(&cond, &mu);
            }
        }
        struct cmd *c = cmds_head;
        cmds_head = NULL;
        cmds_tail = &cmds_head;
        woken = 0;
        int sig = got_signal;
        pthread_mutex_unlock(&mu);

        for (struct xmsg *m = xq_take_all(to_core), *next; m != NULL; m = next) {
            next = m->next;
            on_msg(m);
            xmsg_free(m);
        }
        for (struct cmd *next; c != NULL; c = next) {
            next = c->next;
            on_cmd(t, c->line);
            free(c);
        }
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int expired = seconds > 0 && (now.tv_sec > end.tv_sec ||
                                      (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec));
        pthread_mutex_lock(&mu);
        if (sig || expired)
            break;
    }
    int sig = got_signal;
    pthread_mutex_unlock(&mu);

    /* as the core does it: SHUTDOWN, then stop (join); then report what came out meanwhile */
    xq_push(to_ws, xmsg_new(XMSG_SHUTDOWN, 0, NULL, 0));
    emit_stats(t);
    ws_thread_stop(t);
    for (struct xmsg *m = xq_take_all(to_core), *next; m != NULL; m = next) {
        next = m->next;
        on_msg(m);
        xmsg_free(m);
    }
    if (!sig)
        pthread_kill(sig_tid, SIGTERM);
    pthread_join(sig_tid, NULL);
    pthread_mutex_lock(&mu);
    for (struct cmd *c = cmds_head, *next; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    cmds_head = NULL;
    pthread_mutex_unlock(&mu);
    xq_free(to_core);
    xq_free(to_ws);
    emit(json_pack("{s:s}", "type", "exit"));
    return 0;
}
