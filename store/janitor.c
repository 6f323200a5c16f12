/* janitor.c - see janitor.h. runs on: core thread. */
#include "store/janitor.h"
#include "store/keys.h"
#include "store/rec.h"
#include "store/command.h"
#include "relay/common/log.h"
#include "relay/common/util.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Several partitions: a deleted endpoint leaves {P}:whgone once every partition reported
 * that nothing of it is left there (bit k of mask: partition k did). */
struct gone_mark {
    char id[128];
    uint64_t mask;
};

struct janitor {
    struct event_base *base;
    struct store *s;
    unsigned np, part, probe_i; /* partitions; the one swept next; the probe's turn */
    struct gone_mark *gone;
    size_t ngone;
    struct janitor_opts o;
    struct store_script sc;
    struct event *tick_ev, *probe_ev;
    int64_t tick_ms;
    struct step *busy; /* the sweep step in flight, or NULL */
    struct probe *probe; /* the probe in flight, or NULL */
    /* the request retention sweep (store/req_gc.lua): its own pace, one partition a step */
    struct store_script sc_req;
    struct event *req_ev;
    int64_t req_tick_ms;
    unsigned req_part;
    char req_cursor[32]; /* creation-time score to resume at in req_part ("" = the oldest), or
                          * "a..." in the walk of an older version's {P}:all (req_gc.lua) */
    struct step *req_busy;
    /* the walk of {P}:all: done in partition k since the process started (req_walked[k]),
     * the ids it copied into {P}:ct there so far (-1: no {P}:all) */
    unsigned char req_walked[KEY_MAX_PARTITIONS];
    long long req_copied;
    struct rec_pass *rec; /* the record pass (store/rec.h) */
};

/* A request in flight; detached (j = NULL) when the janitor is freed before its reply. */
struct step {
    struct janitor *j;
};
struct probe {
    struct janitor *j;
};

static uint64_t int_at(const redisReply *r, size_t i)
{
    if (i >= r->elements || r->element[i]->type != REDIS_REPLY_INTEGER)
        return 0;
    return (uint64_t)r->element[i]->integer;
}

/* Partition part reported endpoint id purged there; once every partition did, it leaves
 * {P}:whgone (idempotent: every process's janitor may do it). */
static void gone_mark(struct janitor *j, const char *id, unsigned part)
{
    size_t i = 0;
    while (i < j->ngone && strcmp(j->gone[i].id, id) != 0)
        i++;
    if (i == j->ngone) {
        if (strlen(id) >= sizeof(j->gone[0].id))
            return;
        j->gone = xrealloc(j->gone, (j->ngone + 1) * sizeof(*j->gone));
        snprintf(j->gone[i].id, sizeof(j->gone[i].id), "%s", id);
        j->gone[i].mask = 0;
        j->ngone++;
    }
    j->gone[i].mask |= 1ULL << part;
    uint64_t all = j->np >= 64 ? ~0ULL : (1ULL << j->np) - 1;
    if (j->gone[i].mask != all)
        return;
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(j->s), "whgone", NULL, NULL);
    if (store_cmd(j->s, NULL, NULL, "ZREM %s %s", k, id) == 0)
        log_info("deleted endpoint purged", "endpoint=%s", id);
    j->gone[i] = j->gone[--j->ngone];
}

static void on_step(void *arg, const char *err, redisReply *r)
{
    struct step *st = arg;
    struct janitor *j = st->j;
    unsigned part = j != NULL ? j->part : 0;
    free(st);
    if (j == NULL)
        return;
    j->busy = NULL;
    j->part = (j->part + 1) % j->np; /* the next step sweeps the next partition */
    int more = 0;
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 4) {
        more = int_at(r, 0) != 0;
        for (size_t i = 4; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_STRING) {
                if (j->np <= 1)
                    log_info("deleted endpoint purged", "endpoint=%s", r->element[i]->str);
                else
                    gone_mark(j, r->element[i]->str, part);
            }
    } else if (err == store_err_server && r != NULL) {
        log_warn("retention sweep failed", "err=\"%.*s\"", (int)strcspn(r->str, "\r\n"), r->str);
    }
    /* a full batch, or partitions left in this round: the next step at once */
    evtimer_add_ms(j->tick_ev, more || j->part != 0 ? 10 : j->tick_ms);
}

/* One wh_gc.lua step on partition j->part. gone: with several partitions, the reply of
 * ZRANGE {P}:whgone 0 9 WITHSCORES (a deployment key the script cannot read), else NULL. */
static void sweep_step(struct janitor *j, const redisReply *gone)
{
    const char *tag = store_part_tag(j->s, j->part);
    char k[5][KEY_MAX], now_s[24], cut[24], batch[16], evcut[24] = "", grace[24];
    key_build(k[0], KEY_MAX, tag, "dead", NULL, NULL);
    key_build(k[1], KEY_MAX, tag, "skipped", NULL, NULL);
    /* several partitions: an unused key of the partition (one slot per script) */
    key_build(k[2], KEY_MAX, j->np > 1 ? tag : store_tag(j->s), "whgone", NULL, NULL);
    key_build(k[3], KEY_MAX, tag, "inflight", NULL, NULL);
    key_build(k[4], KEY_MAX, tag, "events", NULL, NULL);
    int64_t now = wall_ms();
    snprintf(now_s, sizeof(now_s), "%lld", (long long)now);
    snprintf(cut, sizeof(cut), "%lld", (long long)(now - j->o.dead_retention_ms));
    snprintf(batch, sizeof(batch), "%d", JANITOR_BATCH);
    if (j->o.event_age_ms > 0)
        snprintf(evcut, sizeof(evcut), "%lld", (long long)(now - j->o.event_age_ms));
    snprintf(grace, sizeof(grace), "%d", JANITOR_GONE_GRACE_MS);
    size_t ng = gone != NULL && gone->type == REDIS_REPLY_ARRAY ? gone->elements : 0;
    const char **argv = xcalloc(11 + ng, sizeof(*argv));
    const char *fixed[] = {k[0], k[1], k[2], k[3], k[4], store_wh_tag(j->s, j->part),
                           now_s, cut, batch, evcut, grace};
    for (int i = 0; i < 11; i++)
        argv[i] = fixed[i];
    for (size_t i = 0; i < ng; i++)
        argv[11 + i] = gone->element[i]->str ? gone->element[i]->str : "0";
    struct step *st = xcalloc(1, sizeof(*st));
    st->j = j;
    if (store_eval(j->s, &j->sc, on_step, st, 5, (int)(11 + ng), argv, NULL) != 0) {
        free(st);
        evtimer_add_ms(j->tick_ev, j->tick_ms);
    } else {
        j->busy = st;
    }
    free(argv);
}

static void on_gone(void *arg, const char *err, redisReply *r)
{
    struct step *st = arg;
    struct janitor *j = st->j;
    free(st);
    if (j == NULL)
        return;
    j->busy = NULL;
    if (err != NULL || r->type != REDIS_REPLY_ARRAY) {
        evtimer_add_ms(j->tick_ev, j->tick_ms);
        return;
    }
    sweep_step(j, r);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct janitor *j = arg;
    if (j->busy != NULL)
        return;
    if (!store_ready(j->s)) {
        evtimer_add_ms(j->tick_ev, j->tick_ms);
        return;
    }
    if (j->np <= 1) {
        sweep_step(j, NULL);
        return;
    }
    char k[KEY_MAX];
    key_build(k, sizeof(k), store_tag(j->s), "whgone", NULL, NULL);
    struct step *st = xcalloc(1, sizeof(*st));
    st->j = j;
    if (store_cmd(j->s, on_gone, st, "ZRANGE %s 0 9 WITHSCORES", k) != 0) {
        free(st);
        evtimer_add_ms(j->tick_ev, j->tick_ms);
        return;
    }
    j->busy = st;
}

static void on_req_step(void *arg, const char *err, redisReply *r)
{
    struct step *st = arg;
    struct janitor *j = st->j;
    free(st);
    if (j == NULL)
        return;
    j->req_busy = NULL;
    int more = 0, walk = j->req_cursor[0] == 'a';
    if (err == NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_STRING) {
        snprintf(j->req_cursor, sizeof(j->req_cursor), "%s", r->element[1]->str);
        more = j->req_cursor[0] != '\0';
        if (walk) {
            long long n = r->element[0]->integer;
            if (n >= 0)
                j->req_copied = (j->req_copied < 0 ? 0 : j->req_copied) + n;
            else
                j->req_copied = -1;
            if (!more) { /* walked: this partition's retention scan follows */
                j->req_walked[j->req_part] = 1;
                if (j->req_copied >= 0)
                    log_info("older request index walked", "key=%s:all copied=%lld",
                             store_part_tag(j->s, j->req_part), j->req_copied);
                more = 1;
            }
        }
    } else {
        if (err == store_err_server && r != NULL)
            log_warn("request retention sweep failed", "err=\"%.*s\"",
                     (int)strcspn(r->str, "\r\n"), r->str);
        j->req_cursor[0] = '\0'; /* a cursor belongs to its partition: the next pass anew */
    }
    if (!more) /* this partition's scan reached the cutoff: the next partition */
        j->req_part = (j->req_part + 1) % j->np;
    evtimer_add_ms(j->req_ev, more || j->req_part != 0 ? 10 : j->req_tick_ms);
}

static void on_req_tick(evutil_socket_t fd, short what, void *arg)
{
    struct janitor *j = arg;
    if (j->req_busy != NULL)
        return;
    if (!store_ready(j->s)) {
        evtimer_add_ms(j->req_ev, j->req_tick_ms);
        return;
    }
    const char *tag = store_part_tag(j->s, j->req_part);
    if (j->req_cursor[0] == '\0' && !j->req_walked[j->req_part]) {
        j->req_cursor[0] = 'a'; /* first the walk of an older version's {P}:all */
        j->req_cursor[1] = '\0';
        j->req_copied = 0;
    }
    char k_ct[KEY_MAX], k_all[KEY_MAX], cut[24], batch[16];
    key_build(k_ct, sizeof(k_ct), tag, "ct", NULL, NULL);
    key_build(k_all, sizeof(k_all), tag, "all", NULL, NULL);
    snprintf(cut, sizeof(cut), "%lld", (long long)(wall_ms() - j->o.request_retention_ms));
    snprintf(batch, sizeof(batch), "%d", JANITOR_BATCH);
    const char *argv[] = {k_ct, k_all, tag, cut, batch, j->req_cursor};
    struct step *st = xcalloc(1, sizeof(*st));
    st->j = j;
    if (store_eval(j->s, &j->sc_req, on_req_step, st, 2, 6, argv, NULL) != 0) {
        free(st);
        evtimer_add_ms(j->req_ev, j->req_tick_ms);
        return;
    }
    j->req_busy = st;
}

static void on_probe(void *arg, const char *err, redisReply *r)
{
    struct probe *p = arg;
    struct janitor *j = p->j;
    free(p);
    if (j == NULL)
        return;
    j->probe = NULL;
    if (err == NULL)
        store_write_ok(j->s); /* a refusal, if any, was noted by the store itself */
}

static void on_probe_tick(evutil_socket_t fd, short what, void *arg)
{
    struct janitor *j = arg;
    if (j->probe == NULL && store_ready(j->s)) {
        /* several partitions: the deployment's tag and each partition's in turn, so a master
         * refusing writes shows whichever partition it serves */
        unsigned t = j->np > 1 ? j->probe_i++ % (j->np + 1) : 0;
        char k[KEY_MAX];
        key_build(k, sizeof(k), t == 0 ? store_tag(j->s) : store_part_tag(j->s, t - 1), "probe",
                  NULL, NULL);
        struct probe *p = xcalloc(1, sizeof(*p));
        p->j = j;
        if (store_cmd(j->s, on_probe, p, "SET %s 1 PX 10000", k) != 0)
            free(p);
        else
            j->probe = p;
    }
    evtimer_add_ms(j->probe_ev, JANITOR_PROBE_MS);
}

struct janitor *janitor_new(struct event_base *base, struct store *s,
                            const struct janitor_opts *o)
{
    struct janitor *j = xcalloc(1, sizeof(*j));
    j->base = base;
    j->s = s;
    j->o = *o;
    j->np = store_partitions(s);
    store_script_init(&j->sc, "wh_gc");
    /* a short retention is swept often enough to hold it within ~10% */
    j->tick_ms = JANITOR_TICK_MAX_MS;
    if (o->dead_retention_ms / 10 < j->tick_ms)
        j->tick_ms = o->dead_retention_ms / 10;
    if (o->event_age_ms > 0 && o->event_age_ms / 10 < j->tick_ms)
        j->tick_ms = o->event_age_ms / 10;
    if (j->tick_ms < 100)
        j->tick_ms = 100;
    j->tick_ev = evtimer_new(base, on_tick, j);
    j->probe_ev = evtimer_new(base, on_probe_tick, j);
    evtimer_add_ms(j->tick_ev, j->tick_ms);
    if (o->request_retention_ms > 0) {
        store_script_init(&j->sc_req, "req_gc");
        j->req_tick_ms = JANITOR_TICK_MAX_MS;
        if (o->request_retention_ms / 10 < j->req_tick_ms)
            j->req_tick_ms = o->request_retention_ms / 10;
        if (j->req_tick_ms < 100)
            j->req_tick_ms = 100;
        j->req_ev = evtimer_new(base, on_req_tick, j);
        evtimer_add_ms(j->req_ev, j->req_tick_ms);
    }
    evtimer_add_ms(j->probe_ev, JANITOR_PROBE_MS);
    j->rec = rec_pass_new(base, s, o->stream_maxlen, o->compress_records);
    return j;
}

void janitor_free(struct janitor *j)
{
    if (j == NULL)
        return;
    if (j->busy)
        j->busy->j = NULL;
    if (j->probe)
        j->probe->j = NULL;
    if (j->req_busy)
        j->req_busy->j = NULL;
    rec_pass_free(j->rec);
    if (j->req_ev != NULL)
        event_free(j->req_ev);
    event_free(j->tick_ev);
    event_free(j->probe_ev);
    free(j->gone);
    free(j);
}
