/* facts.c - see facts.h. runs on: core thread.
 *
 * Ownership: a struct learn (one merge of one request's facts) owns its copy of the facts
 * text until its last store answer; a struct sub owns its copy of the observation and of
 * the facts until the apply's answer, then hands the facts to a learn. */
#include "relay/ingest/facts.h"
#include "protocol/facts.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/config.h"
#include "relay/core.h"
#include "relay/ingest/chains.h"
#include "relay/ingest/ingest.h"
#include "store/facts.h"
#include "store/search.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEARN_ROUNDS 4 /* compare-and-set attempts against concurrent writers */

struct sub;
static void sub_apply(struct sub *s, int learn_after);

struct learn {
    struct core *c;
    char id[PROTO_MAX_ID + 1];
    char *facts; /* owned: the new text */
    size_t len;
    char *merged; /* owned: the text being written (while a put is in flight) */
    size_t merged_len;
    int rounds;
    /* facts written before their item's status (facts_submit): the status about to be
     * applied ("": none), the apply to submit when this learn ends (owned until then), and
     * whether the facts are stored (written, or nothing new to write) */
    char status[PROTO_MAX_ID + 1];
    struct sub *then;
    int stored;
};

/* The end of every learn: frees it, then submits the apply waiting for it (facts_submit);
 * facts not stored (no hash yet, an error) are learned again after that apply. */
static void learn_free(struct learn *l)
{
    struct sub *then = l->then;
    int learn_after = !l->stored;
    free(l->facts);
    free(l->merged);
    free(l);
    if (then != NULL)
        sub_apply(then, learn_after);
}

static void learn_round(struct learn *l);

/* The follow-up event facts_put.lua claimed: one more event of the state in rec (the
 * request's last event) flagged PROTO_F_FACTS, written through the apply step like any
 * observation (its compare-and-set on seq: when another event came first, that one carries
 * the new facts and the follow-up is a duplicate). It carries the version just written. */
static void follow_up(struct core *c, const char *id, const char *rec, size_t rec_len)
{
    struct status_event ev;
    struct proto_err perr = {0};
    status_event_init(&ev);
    if (proto_event_from_record(rec, rec_len, &ev, &perr) != 0) {
        log_warn("facts follow-up not made: stored state unreadable", "request=%s err=%s",
                 id, proto_strerror(perr.code));
        status_event_cleanup(&ev);
        return;
    }
    ev.flags = (ev.flags & ~PROTO_F_MASK) | PROTO_F_FACTS; /* seq: the event it follows */
    ev.source = PROTO_SRC_REQUESTS; /* the facts came from /requests/v3 */
    ev.observed_at = wall_ms();
    ev.published_at = 0;
    free(ev.metadata); /* the apply step adds the request's own */
    ev.metadata = NULL;
    ingest_submit(c->ingest, &ev, 0, NULL, NULL);
    status_event_cleanup(&ev);
}

static void on_put(void *arg, const char *err, enum store_facts_put_result res,
                   const char *rec, size_t rec_len)
{
    struct learn *l = arg;
    if (err == NULL && res == STORE_FACTS_WRITTEN)
        l->stored = 1;
    if (err == NULL && res == STORE_FACTS_WRITTEN &&
        store_search_index(l->c->store, l->id, l->merged, l->merged_len, NULL, NULL) != 0)
        /* the one place facts are written: the search indexes (wallets, referrer, every
         * transaction hash, createdAt) follow them; best effort, the next write indexes again */
        log_debug("request facts not indexed", "request=%s", l->id);
    if (err == NULL && res == STORE_FACTS_WRITTEN && rec != NULL)
        follow_up(l->c, l->id, rec, rec_len);
    if (err == NULL && res == STORE_FACTS_CHANGED && l->rounds < LEARN_ROUNDS) {
        free(l->merged);
        l->merged = NULL;
        learn_round(l); /* another writer came first: merge with theirs */
        return;
    }
    if (err != NULL || res == STORE_FACTS_CHANGED)
        log_warn("request facts not stored", "request=%s err=%s rounds=%d", l->id,
                 err ? err : "concurrent_writers", l->rounds);
    learn_free(l);
}

/* The merged text of the stored value raw (NULL: none) and l's facts into *out; *same set
 * when the stored facts already say all of it (nothing to write). *cur_out (may stay NULL)
 * receives the stored text (caller frees). Returns 0 or -1. */
static int merged(const struct learn *l, const char *raw, size_t raw_len, char **out,
                  size_t *out_len, int *same, char **cur_out, size_t *cur_out_len)
{
    *same = 0;
    if (raw == NULL) {
        *out = xstrndup(l->facts, l->len);
        *out_len = l->len;
        return 0;
    }
    char *cur = NULL;
    size_t cur_len = 0;
    struct proto_err perr = {0};
    if (store_facts_decode(raw, raw_len, &cur, &cur_len) != 0) {
        log_warn("stored request facts unreadable: replaced", "request=%s", l->id);
        *out = xstrndup(l->facts, l->len);
        *out_len = l->len;
        return 0;
    }
    int rc = proto_facts_merge(cur, cur_len, l->facts, l->len, out, out_len, &perr);
    if (rc == 0 && *out_len == cur_len && memcmp(*out, cur, cur_len) == 0)
        *same = 1;
    *cur_out = cur;
    *cur_out_len = cur_len;
    if (rc != 0)
        log_warn("request facts not merged", "request=%s err=%s field=%s", l->id,
                 proto_strerror(rc), perr.field);
    return rc == 0 ? 0 : -1;
}

static void on_get(void *arg, const char *err, const struct store_facts_stored *st)
{
    struct learn *l = arg;
    char *text = NULL, *val = NULL, *cur = NULL, *older = NULL, *relast = NULL;
    size_t text_len = 0, val_len = 0, cur_len = 0, older_len = 0, relast_len = 0;
    int same = 0;
    if (err != NULL ||
        merged(l, st->raw, st->raw_len, &text, &text_len, &same, &cur, &cur_len) != 0 || same) {
        l->stored = err == NULL && same;
        free(text); /* same: the stored facts say it all already */
        free(cur);
        learn_free(l);
        return;
    }
    /* explorer links from the chain list known now, once, when the version is written:
     * every body and frame of its events then carries the same bytes (proto_facts_relink) */
    const struct proto_explorers *ex = chains_explorers(l->c->chains);
    char *linked = NULL;
    size_t linked_len = 0;
    struct proto_err perr = {0};
    if (ex != NULL && proto_facts_relink(text, text_len, ex, &linked, &linked_len, &perr) == 0) {
        free(text);
        text = linked;
        text_len = linked_len;
    }
    l->merged = text; /* kept for the search index (on_put) */
    l->merged_len = text_len;
    /* older versions are deltas against the next newer text (store/facts.h): the stored one
     * as kept beside the new one, or - when the write replaces it - the newest older version
     * again against the new text instead of the one it replaces */
    if (cur != NULL && !st->replaces &&
        store_facts_encode_delta(cur, cur_len, text, text_len, &older, &older_len) != 0)
        older = NULL;
    if (cur != NULL && st->replaces && st->last_older != NULL && st->last_older_len > 0 &&
        st->last_older[0] == 'd') {
        char *lt = NULL;
        size_t lt_len = 0;
        if (store_facts_decode_older(st->last_older, st->last_older_len, cur, cur_len, &lt,
                                     &lt_len) == 0 &&
            store_facts_encode_delta(lt, lt_len, text, text_len, &relast, &relast_len) != 0)
            relast = NULL;
        free(lt);
    }
    if (store_facts_encode(text, text_len, &val, &val_len) != 0 ||
        store_facts_put(l->c->store, l->id, st->raw, st->raw_len, val, val_len, older,
                        older_len, relast, relast_len, st->last_seq, l->status, on_put, l) != 0)
        learn_free(l);
    free(val);
    free(cur);
    free(older);
    free(relast);
}

static void learn_round(struct learn *l)
{
    l->rounds++;
    if (store_facts_get(l->c->store, l->id, on_get, l) != 0)
        learn_free(l);
}

static struct learn *learn_new(struct core *c, const char *id, const char *facts, size_t len)
{
    struct learn *l = xcalloc(1, sizeof(*l));
    l->c = c;
    snprintf(l->id, sizeof(l->id), "%s", id);
    l->facts = xstrndup(facts, len);
    l->len = len;
    return l;
}

void facts_learn(struct core *c, const char *id, const char *facts, size_t len)
{
    if (facts == NULL || len == 0)
        return;
    learn_round(learn_new(c, id, facts, len));
}

/* ---- learn, then apply (then learn when there was nothing to learn into) --------------------- */

struct sub {
    struct core *c;
    struct status_event ev; /* owned copy: queued again when Redis is away */
    int track;
    char *facts; /* owned */
    size_t len;
    ingest_done_cb *cb; /* the caller's (NULL: none, the observation queued when Redis is
                           away) */
    void *arg;
};

static void on_applied(void *arg, const char *err, enum proto_verdict v,
                       const struct status_event *ev)
{
    struct sub *s = arg;
    if (err == store_err_disconnected && s->cb == NULL) /* Redis away: queued, facts go */
        ingest_submit(s->c->ingest, &s->ev, s->track, NULL, NULL);
    else if (err == NULL && s->facts != NULL) /* applied, a duplicate or stale: the facts
                                                 merge by updatedAt */
        facts_learn(s->c, s->ev.request_id, s->facts, s->len);
    if (s->cb != NULL)
        s->cb(s->arg, err, v, ev);
    status_event_cleanup(&s->ev);
    free(s->facts);
    free(s);
}

void facts_submit(struct core *c, const struct status_event *ev, int track, const char *facts,
                  size_t len)
{
    facts_submit_cb(c, ev, track, facts, len, NULL, NULL);
}

void facts_submit_cb(struct core *c, const struct status_event *ev, int track, const char *facts,
                     size_t len, ingest_done_cb *cb, void *arg)
{
    /* an updatedAt from the far future is refused before the apply (ingest_refuse_future,
     * which counts it): its facts go with it */
    if (facts == NULL || len == 0 || ev->updated_at - wall_ms() > c->cfg->max_clock_skew_ms) {
        ingest_submit(c->ingest, ev, track, cb, arg);
        return;
    }
    struct sub *s = xcalloc(1, sizeof(*s));
    s->c = c;
    s->track = track;
    s->cb = cb;
    s->arg = arg;
    status_event_init(&s->ev);
    if (status_event_copy(&s->ev, ev) != 0) {
        free(s);
        ingest_submit(c->ingest, ev, track, cb, arg);
        return;
    }
    s->facts = xstrndup(facts, len);
    s->len = len;
    /* the facts first, as the version of the request's next seq: the event this status makes
     * carries them, so a status change read from /requests/v3 needs no follow-up event (the
     * write claims none while the stored status differs from this one); a request with no
     * hash yet gets its status first and its facts after (learn_free) */
    struct learn *l = learn_new(c, ev->request_id, facts, len);
    snprintf(l->status, sizeof(l->status), "%s", ev->status != NULL ? ev->status : "");
    l->then = s;
    learn_round(l);
}

static void sub_apply(struct sub *s, int learn_after)
{
    if (!learn_after) {
        free(s->facts);
        s->facts = NULL;
    }
    ingest_submit(s->c->ingest, &s->ev, s->track, on_applied, s);
}
