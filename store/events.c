/* events.c - see events.h: the event log's field layout (written by store/apply.lua, read
 * also by store/wh_claim.lua for a body that expired) and the walk over its replies.
 * runs on: core thread (the page commands); the walkers touch nothing but the reply. */
#include "store/command.h"
#include "store/events.h"
#include "store/keys.h"

#include <stdio.h>
#include <string.h>

/* The field names apply.lua writes with XADD. */
#define F_REQUEST_ID "rid"
#define F_RECORD "rec"

size_t store_events_iter_range(struct store_events_iter *it, const redisReply *reply)
{
    it->entries_x = reply != NULL && reply->type == REDIS_REPLY_ARRAY ? reply : NULL;
    it->next_x = 0;
    return it->entries_x != NULL ? it->entries_x->elements : 0;
}

size_t store_events_iter_read(struct store_events_iter *it, const redisReply *reply)
{
    const redisReply *entries = NULL;
    if (reply != NULL && reply->type == REDIS_REPLY_ARRAY && reply->elements > 0 &&
        reply->element[0]->type == REDIS_REPLY_ARRAY && reply->element[0]->elements >= 2)
        entries = reply->element[0]->element[1];
    return store_events_iter_range(it, entries);
}

/* The value of `name` in a flat [name, value, ...] array; NULL when absent. */
static const char *flat_field(const redisReply *fields, const char *name, size_t *len)
{
    if (fields == NULL)
        return NULL;
    for (size_t i = 0; i + 1 < fields->elements; i += 2) {
        const redisReply *k = fields->element[i], *v = fields->element[i + 1];
        if (k->type == REDIS_REPLY_STRING && strcmp(k->str, name) == 0 &&
            v->type == REDIS_REPLY_STRING) {
            if (len != NULL)
                *len = v->len;
            return v->str;
        }
    }
    return NULL;
}

int store_events_next(struct store_events_iter *it, struct store_event_entry *e)
{
    while (it->entries_x != NULL && it->next_x < it->entries_x->elements) {
        const redisReply *r = it->entries_x->element[it->next_x++];
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
            r->element[0]->type != REDIS_REPLY_STRING)
            continue;
        memset(e, 0, sizeof(*e));
        e->sid = r->element[0]->str;
        e->sid_len = r->element[0]->len;
        e->fields = r->element[1]->type == REDIS_REPLY_ARRAY ? r->element[1] : NULL;
        e->rid = flat_field(e->fields, F_REQUEST_ID, &e->rid_len);
        e->rec = flat_field(e->fields, F_RECORD, &e->rec_len);
        return 1;
    }
    return 0;
}

const char *store_event_field(const struct store_event_entry *e, const char *name,
                              size_t *len)
{
    return flat_field(e->fields, name, len);
}

int store_event_decode(const struct store_event_entry *e, struct status_event *out,
                       struct proto_err *err)
{
    if (e->rec == NULL) {
        status_event_init(out);
        return proto_fail(err, PROTO_EMISSING, F_RECORD, "the entry has no record");
    }
    return proto_event_from_record(e->rec, e->rec_len, out, err);
}

int store_events_range(struct store *s, const char *start, const char *end, int count,
                       store_cb *cb, void *arg)
{
    return store_events_range_in(s, store_tag(s), start, end, count, cb, arg);
}

int store_events_range_in(struct store *s, const char *tag, const char *start, const char *end,
                          int count, store_cb *cb, void *arg)
{
    char key[KEY_MAX], cnt[16];
    key_build(key, sizeof(key), tag, "events", NULL, NULL);
    if (count <= 0)
        return store_cmd(s, cb, arg, "XRANGE %s %s %s", key, start, end);
    snprintf(cnt, sizeof(cnt), "%d", count);
    return store_cmd(s, cb, arg, "XRANGE %s %s %s COUNT %s", key, start, end, cnt);
}

int store_events_last(struct store *s, store_cb *cb, void *arg)
{
    return store_events_last_in(s, store_tag(s), cb, arg);
}

int store_events_last_in(struct store *s, const char *tag, store_cb *cb, void *arg)
{
    char key[KEY_MAX];
    key_build(key, sizeof(key), tag, "events", NULL, NULL);
    return store_cmd(s, cb, arg, "XREVRANGE %s + - COUNT 1", key);
}
