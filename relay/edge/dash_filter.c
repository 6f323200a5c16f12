/* dash_filter.c - see dash_filter.h: the dashboard's filters around protocol/filter.c (the
 * reading rules and words are protocol/dash_msg.c's, shared with the client message parser).
 * runs on: any thread. */
#include "relay/edge/dash_filter.h"
#include "protocol/dash_msg.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "relay/common/log.h"

#include <stdlib.h>
#include <string.h>

int dash_broad_from_json(const json_t *filters, struct proto_filter *out, const char **why)
{
    int rc = dash_msg_filter(filters, out, why); /* the rules and words: protocol/dash_msg.c */
    if (rc == DASH_MSG_ENOMEM) {
        log_err("out of memory", "in=dash_broad_from_json");
        abort(); /* relay/ never handles OOM locally (relay/common/util.h) */
    }
    return rc != 0 ? -1 : 0;
}

json_t *dash_broad_to_json(const struct proto_filter *f)
{
    return proto_filter_to_json(f);
}

int dash_broad_parse(const char *text, size_t len, struct proto_filter *out)
{
    const char *why = NULL;
    json_t *j = json_loadb(text, len, 0, NULL);
    memset(out, 0, sizeof(*out));
    int rc = j != NULL ? dash_broad_from_json(j, out, &why) : -1;
    json_decref(j);
    return rc;
}

void dash_frame_init(struct dash_frame *fr, const char *text, size_t len, const char *status,
                     const char *request_id, int64_t origin, int64_t dest)
{
    memset(fr, 0, sizeof(*fr));
    fr->text = text;
    fr->len = len;
    fr->s.status = status;
    fr->s.request_id = request_id;
    fr->s.origin = origin;
    fr->s.dest = dest;
}

void dash_frame_type(struct dash_frame *fr, int ev_type)
{
    fr->s.type = ev_type == PROTO_EV_STATUS ? NULL : proto_event_type_name(ev_type);
}

void dash_frame_cleanup(struct dash_frame *fr)
{
    json_decref(fr->j);
    memset(fr, 0, sizeof(*fr));
}

static const char *str_at(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k)); /* NULL when absent or not a string */
}

/* The fields beyond the routing ones, from the frame's JSON (proto_event_ws_frame's shape):
 * data.failReason / refundFailReason / referrer / depositAddress.depositor,
 * statusrelay.flags (+ "reorg" for statusrelay.reorg), statusrelay.metadata and the wallets
 * of statusrelay.request (user, sender, recipient) once frames carry request facts. */
static void frame_read(struct dash_frame *fr)
{
    fr->parsed = 1;
    if (fr->text == NULL || (fr->j = json_loadb(fr->text, fr->len, 0, NULL)) == NULL)
        return;
    const json_t *data = json_object_get(fr->j, "data");
    const json_t *rel = json_object_get(fr->j, "statusrelay");
    struct proto_filter_subject *s = &fr->s;
    s->fail_reason = str_at(data, "failReason");
    s->refund_fail_reason = str_at(data, "refundFailReason");
    s->referrer = str_at(data, "referrer");
    size_t nw = 0, nf = 0, i;
    const char *w = str_at(json_object_get(data, "depositAddress"), "depositor");
    if (w != NULL)
        fr->wallets[nw++] = w;
    static const char *const wk[] = {"user", "sender", "recipient"};
    const json_t *req = json_object_get(rel, "request");
    for (i = 0; i < 3 && nw < 4; i++)
        if ((w = str_at(req, wk[i])) != NULL)
            fr->wallets[nw++] = w;
    json_t *fl;
    json_array_foreach(json_object_get(rel, "flags"), i, fl)
    {
        if (json_is_string(fl) && nf < 15)
            fr->flags[nf++] = json_string_value(fl);
    }
    if (json_is_object(json_object_get(rel, "reorg")))
        fr->flags[nf++] = "reorg";
    s->flags = fr->flags;
    s->nflags = nf;
    s->wallets = fr->wallets;
    s->nwallets = nw;
    s->metadata = json_object_get(rel, "metadata");
}

/* 1 when f asks for more than the routing fields a frame comes with. */
static int needs_frame(const struct proto_filter *f)
{
    return f->users != NULL || f->referrers != NULL || f->fail_reasons != NULL ||
           f->refund_fail_reasons != NULL || f->flags != NULL || f->metadata != NULL;
}

int dash_broad_match(const struct proto_filter *f, struct dash_frame *fr)
{
    if (!fr->parsed && needs_frame(f))
        frame_read(fr);
    return proto_filter_match(f, &fr->s);
}

int dash_broad_equal(const struct proto_filter *a, const struct proto_filter *b)
{
    return proto_filter_equal(a, b);
}

int dash_broad_is_all(const struct proto_filter *f)
{
    return proto_filter_is_all(f);
}

void dash_broad_cleanup(struct proto_filter *f)
{
    proto_filter_cleanup(f);
}
