/* record.c - our storage record (proto_event_record's JSON, read back from Redis) into
 * struct status_event: proto_event_from_record (declared in event.h).
 *
 * The record is read with the field readers of normalize.c in record mode (nctx.record):
 * every key present, values exact, no defaults and no derived flags (the record carries its
 * own), plus the relay's fields (flags, source, timestamps, seq, eventId, previousStatus,
 * reorg, metadata). The tracking metadata's own reader (proto_metadata_parse) is here too:
 * one rule for what the API stores and what a record may carry.
 * runs on: any thread (pure). */
#include "protocol/event.h"

#include "protocol/normalize_internal.h"

#include <stdlib.h>
#include <string.h>

static int rd_event_id(const struct nctx *c, const struct pjson *obj, struct status_event *ev)
{
    const struct pjson *s;
    int p, rc;
    if ((rc = norm_rd_str(c, obj, "eventId", 1, &s, &p)) != 0)
        return rc;
    if (s->u.str.n >= PROTO_EVENT_ID_MAX)
        return norm_fail(c, PROTO_ETOOLONG, "eventId", "too long");
    for (uint32_t i = 0; i < s->u.str.n; i++) {
        char ch = s->u.str.s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '_'))
            return norm_fail(c, PROTO_EVALUE, "eventId", "bad character");
    }
    memcpy(ev->event_id, s->u.str.s, s->u.str.n + 1);
    return 0;
}

/* "reorg": optional (older records have none), an object or null. */
static int rd_record_reorg(const struct nctx *c, const struct pjson *r, struct status_event *ev)
{
    if (norm_presence(r) != NORM_VALUE)
        return 0;
    if (r->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, "reorg", "expected an object or null");
    size_t n = pjson_compact(r, NULL, 0);
    if (n > PROTO_MAX_REORG)
        return norm_fail(c, PROTO_ETOOLONG, "reorg", "longer than PROTO_MAX_REORG");
    if (pjson_depth(r) > PROTO_MAX_JSON_DEPTH)
        return norm_fail(c, PROTO_ETOOLONG, "reorg", "nested deeper than PROTO_MAX_JSON_DEPTH");
    if ((ev->reorg = malloc(n + 1)) == NULL)
        return norm_fail(c, PROTO_ENOMEM, "reorg", "out of memory");
    pjson_compact(r, ev->reorg, n);
    ev->reorg[n] = '\0';
    return 0;
}

/* Tracking metadata held in node m: an object within PROTO_MAX_METADATA and
 * PROTO_MAX_JSON_DEPTH; *out (optional) gets its compact text. */
static int rd_metadata(const struct nctx *c, const struct pjson *m, char **out)
{
    if (m->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, "metadata", "expected an object");
    size_t n = pjson_compact(m, NULL, 0);
    if (n > PROTO_MAX_METADATA)
        return norm_fail(c, PROTO_ETOOLONG, "metadata", "longer than 4096 bytes of compact JSON");
    if (pjson_depth(m) > PROTO_MAX_JSON_DEPTH)
        return norm_fail(c, PROTO_ETOOLONG, "metadata", "nested deeper than 32");
    if (out == NULL)
        return 0;
    if ((*out = malloc(n + 1)) == NULL)
        return norm_fail(c, PROTO_ENOMEM, "metadata", "out of memory");
    pjson_compact(m, *out, n);
    (*out)[n] = '\0';
    return 0;
}

int proto_metadata_parse(const char *buf, size_t len, char **out, struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 1};
    int rc = pjson_parse(buf, len, &doc, err);
    if (rc != 0)
        return rc;
    rc = rd_metadata(&c, doc.root, out);
    pjson_free(&doc);
    return rc;
}

/* A required relay timestamp or counter: an integer 0..PROTO_MAX_TS. */
static int rd_ts(const struct nctx *c, const struct pjson *obj, const char *key, int64_t *out)
{
    int p;
    return norm_rd_int(c, obj, key, 1, 0, PROTO_MAX_TS, out, &p);
}

/* The "event" object of a record of another type (event.h): its type, seq and creation
 * time (and the type's own fields) override the state record's; endpoint.disabled has no
 * state record (request_id gets the webhook id). The event id is derived, never stored. */
static int rd_record_type(const struct nctx *c, const struct pjson *t, struct status_event *ev)
{
    const struct pjson *s;
    int64_t v;
    int p, rc, type;
    if (t->type != PJSON_OBJ)
        return norm_fail(c, PROTO_ETYPE, "event", "expected an object");
    if ((rc = norm_rd_str(c, t, "type", 1, &s, &p)) != 0)
        return rc;
    if ((type = proto_event_type_parse(s->u.str.s)) <= PROTO_EV_STATUS)
        return norm_fail(c, PROTO_EVALUE, "event", "unknown event type");
    ev->type = (enum proto_event_type)type;
    if ((rc = rd_ts(c, t, "seq", &v)) != 0 || (rc = rd_ts(c, t, "createdAt", &ev->created_at)))
        return rc;
    ev->seq = (uint64_t)v;
    if (type == PROTO_EV_WATCH_ENDED || type == PROTO_EV_ENDPOINT_DISABLED) {
        if ((rc = norm_rd_str(c, t, "reason", 1, &s, &p)) != 0 ||
            (rc = norm_check_token(c, "reason", s)) != 0 ||
            (rc = norm_copy_str(c, "reason", s, &ev->type_reason)) != 0)
            return rc;
    }
    if (type == PROTO_EV_STUCK && (rc = rd_ts(c, t, "stuckSince", &ev->type_at)) != 0)
        return rc;
    if (type == PROTO_EV_ENDPOINT_DISABLED) {
        /* its id is the webhook's; a record that also names a request (refused by the caller)
         * must not leak the request id read before */
        free(ev->request_id);
        ev->request_id = NULL;
        if ((rc = rd_ts(c, t, "at", &ev->type_at)) != 0 ||
            (rc = norm_rd_str(c, t, "webhookId", 1, &s, &p)) != 0 ||
            (rc = norm_check_token(c, "webhookId", s)) != 0 ||
            (rc = norm_copy_str(c, "webhookId", s, &ev->request_id)) != 0 ||
            (rc = norm_rd_text(c, t, "url", 1, &ev->type_url, &p)) != 0)
            return rc;
        proto_event_id(ev->request_id, ev->seq, ev->type_at, ev->event_id);
    } else {
        ev->flags &= ~PROTO_F_REVERSAL; /* a per-event flag of the status event */
        proto_event_id(ev->request_id, ev->seq, ev->gen, ev->event_id);
    }
    return ev->event_id[0] == '\0' ? norm_fail(c, PROTO_ENOMEM, "event", "out of memory") : 0;
}

int proto_event_from_record(const char *buf, size_t len, struct status_event *out,
                            struct proto_err *err)
{
    struct pjson_doc doc;
    struct nctx c = {err, "", 1};
    const struct pjson *root, *s;
    int64_t v;
    int p, rc;
    status_event_init(out);
    if ((rc = pjson_parse(buf, len, &doc, err)) != 0)
        return rc;
    root = doc.root;
    if (root->type != PJSON_OBJ) {
        rc = norm_fail(&c, PROTO_ETYPE, "", "expected an object");
        goto out;
    }
    const struct pjson *typed = pjson_get(root, "event");
    if (typed != NULL && pjson_get(root, "requestId") == NULL) { /* endpoint.disabled */
        rc = rd_record_type(&c, typed, out);
        if (rc == 0 && out->type != PROTO_EV_ENDPOINT_DISABLED)
            rc = norm_fail(&c, PROTO_EMISSING, "requestId", "missing");
        goto out;
    }
    if ((rc = norm_payload(&c, root, NULL, out)) != 0)
        goto out;
    if ((rc = norm_rd_int(&c, root, "flags", 1, 0, UINT32_MAX, &v, &p)) != 0)
        goto out;
    /* the details value's type (read above) is the authority on PROTO_HAS_DETAILS_JSON */
    out->flags = ((unsigned)v & ~PROTO_HAS_DETAILS_JSON) | (out->flags & PROTO_HAS_DETAILS_JSON);
    if ((rc = norm_rd_str(&c, root, "source", 1, &s, &p)) != 0)
        goto out;
    if ((v = proto_source_parse(s->u.str.s)) < 0) {
        rc = norm_fail(&c, PROTO_EVALUE, "source", "unknown source");
        goto out;
    }
    out->source = (enum proto_source)v;
    if ((rc = rd_ts(&c, root, "observedAt", &out->observed_at)) != 0 ||
        (rc = rd_ts(&c, root, "publishedAt", &out->published_at)) != 0 ||
        (rc = rd_ts(&c, root, "createdAt", &out->created_at)) != 0 ||
        (rc = rd_ts(&c, root, "seq", &v)) != 0 ||
        (rc = rd_event_id(&c, root, out)) != 0)
        goto out;
    out->seq = (uint64_t)v;
    /* "gen": optional (records of versions before generations have none: 0) */
    if ((rc = norm_rd_int(&c, root, "gen", 0, 0, PROTO_MAX_TS, &v, &p)) != 0)
        goto out;
    out->gen = p ? v : 0;
    if ((rc = norm_need_key(&c, root, "previousStatus")) != 0 ||
        (rc = norm_rd_str(&c, root, "previousStatus", 0, &s, &p)) != 0)
        goto out;
    if (s != NULL && ((rc = norm_check_token(&c, "previousStatus", s)) != 0 ||
                      (rc = norm_copy_str(&c, "previousStatus", s, &out->prev_status)) != 0))
        goto out;
    if ((rc = rd_record_reorg(&c, pjson_get(root, "reorg"), out)) != 0)
        goto out;
    /* "metadata": optional (older records, requests tracked without it), object or null */
    const struct pjson *m = pjson_get(root, "metadata");
    if (norm_presence(m) == NORM_VALUE && (rc = rd_metadata(&c, m, &out->metadata)) != 0)
        goto out;
    if (typed != NULL) {
        rc = rd_record_type(&c, typed, out);
        if (rc == 0 && out->type == PROTO_EV_ENDPOINT_DISABLED)
            rc = norm_fail(&c, PROTO_EVALUE, "event", "endpoint.disabled with a request");
    }
out:
    if (rc != 0)
        status_event_cleanup(out);
    pjson_free(&doc);
    return rc;
}
