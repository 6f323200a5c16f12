/* frames.c - see frames.h: frames from the hub to the ws thread.
 * runs on: core thread. */
#include "relay/dash/frames.h"
#include "protocol/event.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/edge/dash_filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dash_str_set(char **dst, const char *s)
{
    size_t n = strlen(s);
    if (*dst != NULL && strlen(*dst) >= n) {
        memcpy(*dst, s, n + 1);
        return;
    }
    free(*dst);
    *dst = xstrdup(s);
}

void dash_send_text(struct hub *h, uint64_t sess, const char *key, const char *text,
                    size_t len)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_SEND, sess, text, len);
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
}

void dash_send_json(struct hub *h, uint64_t sess, const char *key, json_t *j)
{
    char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
    if (t != NULL)
        dash_send_text(h, sess, key, t, strlen(t));
    free(t);
    json_decref(j);
}

void dash_send_error(struct hub *h, uint64_t sess, const char *type, const char *code,
                     const char *message, json_t *data)
{
    json_t *j = json_pack("{s:s,s:s,s:{s:s,s:s}}", "type", type ? type : "error", "status",
                          "error", "error", "code", code, "message", message);
    if (data != NULL)
        json_object_set_new(j, "data", data);
    dash_send_json(h, sess, NULL, j);
}

void dash_filter_op(struct hub *h, uint64_t sess, enum dash_op op, const char *key,
                    uint64_t gen, const char *data)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_ACCEPT_SUB, sess, data, data ? strlen(data) : 0);
    m->code = op;
    m->gen = gen;
    if (key != NULL)
        snprintf(m->key, sizeof(m->key), "%s", key);
    xq_push(h->c->to_ws, m);
}

void dash_close(struct hub *h, uint64_t sess, int code, const char *reason)
{
    struct xmsg *m = xmsg_new(XMSG_DASH_CLOSE, sess, reason, strlen(reason));
    m->code = code;
    xq_push(h->c->to_ws, m);
}

static json_t *sub_filters_json(const struct hsub *u)
{
    if (u->kind == SUB_ID)
        return json_pack("{s:s}", "id", u->id);
    return dash_broad_to_json(&u->f);
}

json_t *dash_sub_data(const struct hsub *u)
{
    return json_pack("{s:s,s:o}", "event", u->kind == SUB_STATS ? STATS_EVENT : EVENT_NAME,
                     "filters", sub_filters_json(u));
}

char *dash_encode_frame(struct hub *h, const char *rec, size_t rlen, int snapshot,
                        const char *sid, const char *facts, struct status_event *ev,
                        size_t *len)
{
    struct proto_err pe;
    memset(&pe, 0, sizeof(pe));
    if (proto_event_from_record(rec, rlen, ev, &pe) != 0) {
        if (h->frame_errors++ == 0)
            log_warn("event record unreadable, not sent to dashboards", "stream_id=%s",
                     sid ? sid : "");
        return NULL;
    }
    if (facts != NULL)
        ev->facts = xstrdup(facts);
    size_t flen = 0;
    char *f = proto_event_ws_frame(ev, snapshot, wall_ms(), &flen);
    /* a snapshot of a request whose last event is its request.watch.ended says why the
     * watch ended: "watchEnded": the reason (the live page's final / abandoned marks) */
    char we[48] = "";
    if (snapshot && ev->type == PROTO_EV_WATCH_ENDED && ev->type_reason != NULL &&
        strlen(ev->type_reason) < 24 &&
        strspn(ev->type_reason, "abcdefghijklmnopqrstuvwxyz_") == strlen(ev->type_reason))
        snprintf(we, sizeof(we), ",\"watchEnded\":\"%s\"", ev->type_reason);
    int has_sid = sid != NULL && sid[0] != '\0';
    if (f == NULL || flen < 2 || (!has_sid && we[0] == '\0')) {
        *len = flen;
        return f;
    }
    /* the frame ends with the statusrelay object's "}" and the envelope's "}" */
    size_t sl = has_sid ? strlen(sid) : 0, wl = strlen(we);
    char *out = xmalloc(flen + wl + sl + 16);
    memcpy(out, f, flen - 2);
    size_t n = flen - 2;
    memcpy(out + n, we, wl);
    n += wl;
    if (has_sid) {
        memcpy(out + n, ",\"streamId\":\"", 13);
        n += 13;
        memcpy(out + n, sid, sl);
        n += sl;
        out[n++] = '"';
    }
    memcpy(out + n, "}}", 3);
    n += 2;
    free(f);
    *len = n;
    return out;
}
