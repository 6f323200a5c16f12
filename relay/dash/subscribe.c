/* subscribe.c - see subscribe.h: the subscribe decision (pure).
 * runs on: any thread. */
#include "relay/dash/subscribe.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

static int token_configured(const struct dash_sub_facts *f)
{
    return f->stream_token != NULL && f->stream_token[0] != '\0';
}

static int token_ok(const struct dash_sub_facts *f, const char *tok)
{
    if (!token_configured(f) || tok == NULL)
        return 0;
    size_t n = strlen(f->stream_token);
    return strlen(tok) == n && CRYPTO_memcmp(tok, f->stream_token, n) == 0;
}

/* Broad subscriptions and stats: a valid token, or no token configured, a loopback listener
 * and a page of the same origin. */
static int broad_allowed(const struct dash_sub_facts *f, int authed)
{
    return authed || (!token_configured(f) && f->loopback_listen && !f->cross_origin);
}

static void refuse(struct dash_sub_decision *d, const char *code, const char *message)
{
    d->verdict = DASH_SUB_REFUSE;
    d->code = code;
    snprintf(d->message, sizeof(d->message), "%s", message);
}

/* The message's target (no fault left): the same again, a refusal, or a new one. */
static void decide_target(const struct dash_msg *m, const struct dash_sub_facts *f, int authed,
                          struct dash_sub_decision *d)
{
    int id = m->target == DASH_TARGET_ID;
    if (id && !(authed || f->ws_anonymous || broad_allowed(f, authed))) {
        refuse(d, "unauthorized", "anonymous subscriptions are disabled: send the stream token");
        return;
    }
    if (!id && !broad_allowed(f, authed)) {
        refuse(d, "unauthorized",
               "subscriptions broader than one request id need the stream token "
               "(\"token\" or ?token=)");
        return;
    }
    if (f->same_no != 0) { /* the same id or filter again: ack (an id: and state) again */
        d->verdict = DASH_SUB_AGAIN;
        d->snapshot_again = id && f->same_live;
        return;
    }
    if (f->nsubs >= (size_t)f->max_subs) {
        d->verdict = DASH_SUB_REFUSE;
        d->code = "too_many_subscriptions";
        snprintf(d->message, sizeof(d->message), "at most %lld subscriptions per connection",
                 (long long)f->max_subs);
        return;
    }
    d->verdict = DASH_SUB_NEW;
    d->broad = !id;
    d->anon = id && !authed;
    d->take_addr_id = d->anon && !f->id_watched;
    d->resume = m->from != NULL;
}

void dash_subscribe_decide(const struct dash_msg *m, int err, const struct dash_sub_facts *f,
                           struct dash_sub_decision *d)
{
    memset(d, 0, sizeof(*d));
    if (err && m->fault.stage == DASH_STAGE_EARLY) {
        d->verdict = DASH_SUB_FAULT;
        return;
    }
    int authed = f->authed;
    if (m->token_present && token_configured(f)) { /* no token configured: ignored */
        if (!token_ok(f, m->token)) {
            refuse(d, "unauthorized", "the stream token is not valid");
            return;
        }
        d->authed = authed = 1;
    }
    if (!err && m->event == DASH_EVENT_STATS) {
        if (!broad_allowed(f, authed)) {
            refuse(d, "unauthorized", "stats need the stream token (\"token\" or ?token=)");
            return;
        }
        d->verdict = DASH_SUB_STATS;
        d->new_stats = !f->has_stats;
        return;
    }
    if (err && m->fault.stage == DASH_STAGE_FIELDS) {
        d->verdict = DASH_SUB_FAULT;
        return;
    }
    if (m->from != NULL && !f->resume_ready) {
        refuse(d, "unavailable", "resume needs the event stream, which is unavailable now: retry");
        return;
    }
    if (err) { /* DASH_STAGE_TARGET: the id or the broad filter */
        d->verdict = DASH_SUB_FAULT;
        return;
    }
    decide_target(m, f, authed, d);
}

void dash_subscribe_too_many_ids(int64_t max, struct dash_sub_decision *d)
{
    d->verdict = DASH_SUB_REFUSE;
    d->code = "too_many_ids";
    snprintf(d->message, sizeof(d->message),
             "at most %lld request ids nobody else watches per client address without the "
             "stream token",
             (long long)max);
}
