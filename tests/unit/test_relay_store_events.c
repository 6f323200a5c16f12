/* test_relay_store_events.c - unit tests for store/events.c (the reader of the event log):
 * walks over XRANGE- and XREAD-shaped replies built by hand (entries with and without fields,
 * malformed entries skipped, nil and error replies), field lookup, and decoding an entry's
 * record (as proto_event_from_record decodes it; a missing and an unreadable record).
 * No Redis: the replies are hiredis structs on the stack. runs on: the test process. */
#include "store/command.h"
#include "protocol/event.h"
#include "protocol/proto.h"
#include "store/events.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define MAXN 16

/* A pool of reply nodes and element arrays: every test builds its tree from here. */
struct pool {
    redisReply nodes[64];
    redisReply *arrs[64][MAXN];
    size_t nn, na;
};

static redisReply *str(struct pool *p, const char *s, size_t len)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_STRING;
    r->str = (char *)s;
    r->len = len;
    return r;
}

static redisReply *cstr(struct pool *p, const char *s)
{
    return str(p, s, strlen(s));
}

static redisReply *nil(struct pool *p)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_NIL;
    return r;
}

static redisReply *arr(struct pool *p, size_t n, ...)
{
    redisReply *r = &p->nodes[p->nn++];
    memset(r, 0, sizeof(*r));
    r->type = REDIS_REPLY_ARRAY;
    r->element = p->arrs[p->na++];
    r->elements = n;
    va_list ap;
    va_start(ap, n);
    for (size_t i = 0; i < n; i++)
        r->element[i] = va_arg(ap, redisReply *);
    va_end(ap);
    return r;
}

/* One entry as apply.lua writes it. */
static redisReply *entry(struct pool *p, const char *sid, const char *rid, const char *rec,
                         size_t rec_len)
{
    return arr(p, 2, cstr(p, sid),
               arr(p, 8, cstr(p, "id"), cstr(p, "evt_1"), cstr(p, "rid"), cstr(p, rid),
                   cstr(p, "seq"), cstr(p, "1"), cstr(p, "rec"), str(p, rec, rec_len)));
}

static void test_range_walk(void **state)
{
    struct pool p = {0};
    redisReply *r = arr(&p, 4, entry(&p, "1-0", "0xa", "{}", 2),
                        cstr(&p, "not an entry"),                 /* skipped */
                        arr(&p, 2, cstr(&p, "2-0"), nil(&p)),    /* deleted: no fields */
                        entry(&p, "3-1", "0xb", "{\"x\":1}", 7));
    struct store_events_iter it;
    struct store_event_entry e;
    assert_int_equal(store_events_iter_range(&it, r), 4);
    assert_int_equal(store_events_next(&it, &e), 1);
    assert_string_equal(e.sid, "1-0");
    assert_int_equal(e.sid_len, 3);
    assert_string_equal(e.rid, "0xa");
    assert_int_equal(e.rid_len, 3);
    assert_memory_equal(e.rec, "{}", 2);
    assert_int_equal(e.rec_len, 2);
    size_t len = 0;
    assert_string_equal(store_event_field(&e, "seq", &len), "1");
    assert_int_equal(len, 1);
    assert_string_equal(store_event_field(&e, "id", NULL), "evt_1");
    assert_null(store_event_field(&e, "nope", NULL));
    assert_int_equal(store_events_next(&it, &e), 1);
    assert_string_equal(e.sid, "2-0");
    assert_null(e.fields);
    assert_null(e.rid);
    assert_null(e.rec);
    assert_null(store_event_field(&e, "rec", NULL));
    assert_int_equal(store_events_next(&it, &e), 1);
    assert_string_equal(e.sid, "3-1");
    assert_int_equal(e.rec_len, 7);
    assert_int_equal(store_events_next(&it, &e), 0);
    assert_int_equal(store_events_next(&it, &e), 0); /* stays at the end */
}

static void test_range_not_array(void **state)
{
    struct pool p = {0};
    struct store_events_iter it;
    struct store_event_entry e;
    assert_int_equal(store_events_iter_range(&it, NULL), 0);
    assert_int_equal(store_events_next(&it, &e), 0);
    redisReply *err = cstr(&p, "ERR");
    err->type = REDIS_REPLY_ERROR;
    assert_int_equal(store_events_iter_range(&it, err), 0);
    assert_int_equal(store_events_next(&it, &e), 0);
    assert_int_equal(store_events_iter_range(&it, arr(&p, 0)), 0);
    assert_int_equal(store_events_next(&it, &e), 0);
}

static void test_read_walk(void **state)
{
    struct pool p = {0};
    redisReply *r = arr(&p, 1, arr(&p, 2, cstr(&p, "{P}:events"),
                                   arr(&p, 2, entry(&p, "5-0", "0xa", "{}", 2),
                                       entry(&p, "6-0", "0xb", "{}", 2))));
    struct store_events_iter it;
    struct store_event_entry e;
    assert_int_equal(store_events_iter_read(&it, r), 2);
    assert_int_equal(store_events_next(&it, &e), 1);
    assert_string_equal(e.sid, "5-0");
    assert_int_equal(store_events_next(&it, &e), 1);
    assert_string_equal(e.rid, "0xb");
    assert_int_equal(store_events_next(&it, &e), 0);
    /* nil: nothing new */
    assert_int_equal(store_events_iter_read(&it, nil(&p)), 0);
    assert_int_equal(store_events_next(&it, &e), 0);
    assert_int_equal(store_events_iter_read(&it, NULL), 0);
    assert_int_equal(store_events_iter_read(&it, arr(&p, 0)), 0);
}

static void test_decode(void **state)
{
    struct status_event ev, back;
    status_event_init(&ev);
    ev.request_id = strdup("0xabc");
    ev.status = strdup("pending");
    ev.fail_reason = strdup("N/A");
    ev.refund_fail_reason = strdup("N/A");
    ev.updated_at = 1700000000000;
    ev.seq = 3;
    ev.created_at = 1700000000001;
    snprintf(ev.event_id, sizeof(ev.event_id), "evt_0123");
    size_t len = 0;
    char *rec = proto_event_record(&ev, &len);
    assert_non_null(rec);

    struct pool p = {0};
    redisReply *r = arr(&p, 3, entry(&p, "1-0", "0xabc", rec, len),
                        arr(&p, 2, cstr(&p, "2-0"), nil(&p)),
                        entry(&p, "3-0", "0xabc", "{not json", 9));
    struct store_events_iter it;
    struct store_event_entry e;
    struct proto_err err;
    store_events_iter_range(&it, r);

    assert_int_equal(store_events_next(&it, &e), 1);
    assert_int_equal(store_event_decode(&e, &back, &err), 0);
    struct status_event direct; /* the same as decoding the record itself */
    assert_int_equal(proto_event_from_record(rec, len, &direct, &err), 0);
    assert_true(status_event_equal(&back, &direct));
    assert_string_equal(back.request_id, "0xabc");
    assert_int_equal(back.seq, 3);
    status_event_cleanup(&direct);
    status_event_cleanup(&back);

    assert_int_equal(store_events_next(&it, &e), 1); /* no record */
    assert_int_equal(store_event_decode(&e, &back, &err), PROTO_EMISSING);
    assert_string_equal(err.field, "rec");
    assert_null(back.request_id);
    status_event_cleanup(&back);
    assert_int_equal(store_event_decode(&e, &back, NULL), PROTO_EMISSING);
    status_event_cleanup(&back);

    assert_int_equal(store_events_next(&it, &e), 1); /* unreadable */
    assert_int_equal(store_event_decode(&e, &back, &err), PROTO_EJSON);
    status_event_cleanup(&back);

    free(rec);
    status_event_cleanup(&ev);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_walk),
        cmocka_unit_test(test_range_not_array),
        cmocka_unit_test(test_read_walk),
        cmocka_unit_test(test_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
