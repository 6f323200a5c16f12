/* fanout_args.c - the KEYS and ARGV of store/wh_fanout.lua (see fanout.h), built in one
 * place for the live fan-out's commits (fanout.c) and for replays (replay.c).
 * runs on: core thread. */
#include "relay/delivery/fanout.h"
#include "protocol/proto.h"
#include "relay/core.h"
#include "relay/config.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/delivery/endpoints.h"
#include "relay/delivery/wh_view.h"
#include "store/keys.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fanout_args_own(struct fanout_args *a, char *s)
{
    if (a->nowned == a->capowned) {
        a->capowned = a->capowned ? a->capowned * 2 : 64;
        a->owned = xrealloc(a->owned, a->capowned * sizeof(*a->owned));
    }
    a->owned[a->nowned++] = s;
}

static void av_push(struct fanout_args *a, const char *s, size_t len, int own)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
        a->lens = xrealloc(a->lens, a->cap * sizeof(*a->lens));
    }
    a->v[a->n] = s;
    a->lens[a->n++] = len;
    if (own)
        fanout_args_own(a, (char *)s);
}

static void av_str(struct fanout_args *a, const char *s)
{
    av_push(a, s, strlen(s), 0);
}

static void av_num(struct fanout_args *a, long long v)
{
    char *s = xasprintf("%lld", v);
    av_push(a, s, strlen(s), 1);
}

static void av_key(struct fanout_args *a, const char *tag, const char *kind)
{
    char *k = xmalloc(KEY_MAX);
    key_build(k, KEY_MAX, tag, kind, NULL, NULL);
    av_push(a, k, strlen(k), 1);
}

void fanout_args_begin(struct fanout_args *a, struct core *c, struct webhooks *w, int replay,
                       unsigned part)
{
    const char *tag = store_part_tag(c->store, part);
    int several = store_partitions(c->store) > 1;
    memset(a, 0, sizeof(*a));
    av_key(a, tag, "events");
    /* the endpoint set's version is a deployment key: with several partitions the script
     * cannot read it (one slot per script), the caller checks it, and KEYS[2] names an
     * unused key of the partition */
    av_key(a, several ? tag : store_tag(c->store), "whv");
    av_key(a, tag, "fanout");
    av_key(a, tag, "inflight");
    av_key(a, tag, "dead");
    char *vt = wh_view_tag(c, w, part);
    av_push(a, vt, strlen(vt), 1);
    /* the live fan-out checked the version with wh_held.lua before its first attempts */
    av_str(a, replay && !several ? webhooks_version(w) : "*");
    av_str(a, c->instance_id);
    av_num(a, wall_ms());
    av_str(a, FANOUT_GROUP);
    av_num(a, WH_RETENTION_MS);
    av_str(a, replay ? "1" : "0");
    av_num(a, WH_LIST_CAP);
    av_num(a, c->cfg->disable_after_ms);
}

/* One (endpoint, kind, attempt JSON, number) quad of wh_fanout.lua. */
void fanout_args_pair(struct fanout_args *a, const char *whid, char kind, const char *json,
                    long long num)
{
    static const char kinds[] = "psordgf";
    const char *k = strchr(kinds, kind);
    av_str(a, whid);
    av_push(a, k ? k : "p", 1, 0);
    av_str(a, json ? json : "");
    av_num(a, num);
}

/* The fixed part of an event: stream id .. event time; then body and count slots, filled
 * by the caller through *body_at and *n_at. */
void fanout_args_event_head(struct fanout_args *a, const char *sid, const struct status_event *ev,
                          size_t *body_at, size_t *n_at)
{
    av_str(a, sid);
    av_str(a, ev->event_id);
    av_str(a, ev->request_id);
    av_num(a, (long long)ev->seq);
    av_str(a, ev->status ? ev->status : "");
    av_num(a, ev->created_at);
    *body_at = a->n;
    av_push(a, "", 0, 0);
    *n_at = a->n;
    av_push(a, "0", 1, 0);
}

void fanout_args_set_count(struct fanout_args *a, size_t n_at, long long n)
{
    char *ns = xasprintf("%lld", n);
    a->v[n_at] = ns;
    a->lens[n_at] = strlen(ns);
    fanout_args_own(a, ns);
}

void fanout_args_empty_event(struct fanout_args *a, const char *sid)
{
    av_str(a, sid);
    for (int k = 0; k < 6; k++)
        av_push(a, "", 0, 0);
    av_push(a, "0", 1, 0);
    a->events++;
}

long long fanout_args_event(struct fanout_args *a, struct webhooks *w, const char *sid,
                            const struct status_event *ev, fanout_match_cb *match, void *arg,
                            int flags)
{
    if (ev == NULL) { /* deleted or unreadable entry: acknowledged, nothing to deliver */
        fanout_args_empty_event(a, sid);
        return 0;
    }
    size_t at = a->n, body_at, n_at;
    fanout_args_event_head(a, sid, ev, &body_at, &n_at);
    long long nmatch = 0;
    size_t nwh = webhooks_count(w);
    for (size_t k = 0; k < nwh; k++) {
        struct webhook *wh = webhooks_at(w, k);
        char m = match(arg, wh, ev);
        if (m == 0)
            continue;
        fanout_args_pair(a, wh->id, m == 's' ? 's' : 'p', NULL, 0);
        nmatch++;
    }
    if (nmatch == 0 && !(flags & FANOUT_ARGS_KEEP_EMPTY)) {
        a->n = at; /* nothing for this event (owned strings stay owned until freed) */
        return 0;
    }
    if (nmatch > 0 && !(flags & FANOUT_ARGS_NO_BODY)) {
        size_t blen = 0;
        char *body = proto_event_webhook_body(ev, &blen);
        if (body == NULL) {
            log_err("webhook body encoding failed", "event=%s", ev->event_id);
            abort(); /* out of memory: relay/ aborts, see STYLE 4 */
        }
        a->v[body_at] = body;
        a->lens[body_at] = blen;
        fanout_args_own(a, body);
    }
    if (nmatch > 0)
        fanout_args_set_count(a, n_at, nmatch);
    a->events++;
    return nmatch;
}

void fanout_args_free(struct fanout_args *a)
{
    for (size_t i = 0; i < a->nowned; i++)
        free(a->owned[i]);
    free(a->v);
    free(a->lens);
    free(a->owned);
    memset(a, 0, sizeof(*a));
}

