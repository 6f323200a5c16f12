/* test_relay_dash_subscribe.c - unit tests for relay/dash/subscribe.c (the dashboard's
 * subscribe decision, pure) and the gap rule of store/stream.c (store_stream_gap_check):
 * rows of a client message and the facts about its session, and the answer expected.
 * runs on: the test process, one thread. */
#include "relay/dash/subscribe.h"
#include "store/stream.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#define SUB "\"type\":\"subscribe\",\"event\":\"request.status.updated\""
#define STATS "\"type\":\"subscribe\",\"event\":\"statusrelay.stats\""
#define ID "\"filters\":{\"id\":\"0xabc\"}"
#define TOK "sekret"

/* The facts of a row: what differs from a session of a deployment with a stream token,
 * anonymous ids allowed, a public listener, no subscription yet, Redis up. */
enum {
    F_NONE = 0,
    F_NO_TOKEN = 1 << 0, /* no stream token configured */
    F_AUTHED = 1 << 1,   /* the session showed the token already */
    F_LOOPBACK = 1 << 2, /* the listener is on loopback */
    F_CROSS = 1 << 3,    /* a page of another origin */
    F_NO_ANON = 1 << 4,  /* STATUSRELAY_WS_ANONYMOUS off */
    F_DOWN = 1 << 5,     /* the event stream cannot be read */
    F_HAS_STATS = 1 << 6,
    F_FULL = 1 << 7,      /* at STATUSRELAY_WS_MAX_SUBSCRIPTIONS (3) */
    F_SAME = 1 << 8,      /* the same id / filter is subscribed (number 7) */
    F_SAME_LIVE = 1 << 9, /* ... and live */
    F_WATCHED = 1 << 10,  /* the id is watched already */
};

struct row {
    const char *msg;
    unsigned facts;
    enum dash_sub_verdict verdict;
    const char *code;    /* REFUSE */
    const char *message; /* REFUSE: a prefix */
    int authed, new_stats, snapshot_again, broad, anon, take, resume;
};

/* a row: the message, its facts (F_*), the verdict, then the fields that differ from 0 */
#define R(m, f, v, ...) {.msg = (m), .facts = (f), .verdict = (v), __VA_ARGS__}

static const struct row rows[] = {
    /* faults answered at their stage */
    R("{\"type\":\"subscribe\",\"filters\":7}", F_NONE, DASH_SUB_FAULT),
    R("{" SUB ",\"filters\":{\"id\":\"bad id\"}}", F_NONE, DASH_SUB_FAULT),
    R("{\"type\":\"subscribe\",\"event\":\"x\"}", F_NONE, DASH_SUB_FAULT),
    /* the token: checked before the fields, authenticates even a refused subscribe */
    R("{\"type\":\"subscribe\",\"event\":\"x\",\"token\":\"bad\"}", F_NONE, DASH_SUB_REFUSE,
      .code = "unauthorized", .message = "the stream token is not valid"),
    R("{" SUB "," ID ",\"token\":7}", F_NONE, DASH_SUB_REFUSE, .code = "unauthorized",
      .message = "the stream token is not valid"),
    R("{\"type\":\"subscribe\",\"event\":\"x\",\"token\":\"" TOK "\"}", F_NONE, DASH_SUB_FAULT,
      .authed = 1),
    R("{" SUB "," ID ",\"token\":\"anything\"}", F_NO_TOKEN, DASH_SUB_NEW, .anon = 1, .take = 1),
    R("{" SUB "," ID ",\"token\":\"" TOK "\"}", F_NONE, DASH_SUB_NEW, .authed = 1),
    /* stats: the token, or no token on a loopback listener for a page of the same origin */
    R("{" STATS "}", F_NONE, DASH_SUB_REFUSE, .code = "unauthorized",
      .message = "stats need the stream token"),
    R("{" STATS ",\"token\":\"" TOK "\"}", F_NONE, DASH_SUB_STATS, .authed = 1, .new_stats = 1),
    R("{" STATS "}", F_AUTHED | F_HAS_STATS, DASH_SUB_STATS),
    R("{" STATS "}", F_NO_TOKEN | F_LOOPBACK, DASH_SUB_STATS, .new_stats = 1),
    R("{" STATS "}", F_NO_TOKEN | F_LOOPBACK | F_CROSS, DASH_SUB_REFUSE, .code = "unauthorized"),
    R("{" STATS "}", F_NO_TOKEN, DASH_SUB_REFUSE, .code = "unauthorized"),
    R("{" STATS ",\"filters\":7}", F_AUTHED, DASH_SUB_STATS, .new_stats = 1),
    /* resume needs the event stream, checked before the target's faults */
    R("{" SUB "," ID ",\"lastEventId\":\"1-0\"}", F_DOWN, DASH_SUB_REFUSE, .code = "unavailable",
      .message = "resume needs the event stream"),
    R("{" SUB ",\"filters\":{\"id\":\"bad id\"},\"lastEventId\":\"1-0\"}", F_DOWN, DASH_SUB_REFUSE,
      .code = "unavailable"),
    R("{" SUB "," ID ",\"lastEventId\":\"1-0\"}", F_AUTHED, DASH_SUB_NEW, .resume = 1),
    /* one id: the token, anonymous ids, or a loopback page */
    R("{" SUB "," ID "}", F_NO_ANON, DASH_SUB_REFUSE, .code = "unauthorized",
      .message = "anonymous subscriptions are disabled"),
    R("{" SUB "," ID "}", F_NO_ANON | F_NO_TOKEN | F_LOOPBACK, DASH_SUB_NEW, .anon = 1, .take = 1),
    R("{" SUB "," ID "}", F_NONE, DASH_SUB_NEW, .anon = 1, .take = 1),
    R("{" SUB "," ID "}", F_WATCHED, DASH_SUB_NEW, .anon = 1),
    R("{" SUB "," ID "}", F_AUTHED, DASH_SUB_NEW),
    /* broad: the token or a loopback page */
    R("{" SUB "}", F_NONE, DASH_SUB_REFUSE, .code = "unauthorized",
      .message = "subscriptions broader than one request id"),
    R("{" SUB ",\"filters\":{\"status\":\"success\"}}", F_AUTHED, DASH_SUB_NEW, .broad = 1),
    R("{" SUB "}", F_NO_TOKEN | F_LOOPBACK, DASH_SUB_NEW, .broad = 1),
    /* the same again: acked again (a live id: its state again), never a limit */
    R("{" SUB "," ID "}", F_AUTHED | F_SAME | F_FULL, DASH_SUB_AGAIN),
    R("{" SUB "," ID "}", F_AUTHED | F_SAME | F_SAME_LIVE, DASH_SUB_AGAIN, .snapshot_again = 1),
    R("{" SUB "}", F_AUTHED | F_SAME | F_SAME_LIVE, DASH_SUB_AGAIN),
    /* the limit */
    R("{" SUB "," ID "}", F_AUTHED | F_FULL, DASH_SUB_REFUSE, .code = "too_many_subscriptions",
      .message = "at most 3 subscriptions per connection"),
    R("{" SUB "}", F_AUTHED | F_FULL, DASH_SUB_REFUSE, .code = "too_many_subscriptions"),
};

static void facts_of(unsigned bits, struct dash_sub_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->stream_token = bits & F_NO_TOKEN ? "" : TOK;
    f->authed = !!(bits & F_AUTHED);
    f->loopback_listen = !!(bits & F_LOOPBACK);
    f->cross_origin = !!(bits & F_CROSS);
    f->ws_anonymous = !(bits & F_NO_ANON);
    f->resume_ready = !(bits & F_DOWN);
    f->has_stats = !!(bits & F_HAS_STATS);
    f->max_subs = 3;
    f->nsubs = bits & F_FULL ? 3 : 1;
    f->same_no = bits & F_SAME ? 7 : 0;
    f->same_live = !!(bits & F_SAME_LIVE);
    f->id_watched = !!(bits & F_WATCHED);
}

static void test_rows(void **state)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        struct dash_msg m;
        enum dash_msg_error e = dash_msg_parse(r->msg, strlen(r->msg), &m);
        assert_int_not_equal(e, DASH_MSG_ENOMEM);
        struct dash_sub_facts f;
        struct dash_sub_decision d;
        facts_of(r->facts, &f);
        dash_subscribe_decide(&m, e != DASH_MSG_OK, &f, &d);
        char what[64];
        snprintf(what, sizeof(what), "row %zu", i);
        if (d.verdict != r->verdict)
            fail_msg("%s: verdict %d, want %d (%s)", what, d.verdict, r->verdict, r->msg);
        if (r->code != NULL)
            assert_string_equal(d.code, r->code);
        if (r->message != NULL && strncmp(d.message, r->message, strlen(r->message)) != 0)
            fail_msg("%s: message \"%s\", want \"%s...\"", what, d.message, r->message);
        if (d.authed != r->authed || d.new_stats != r->new_stats ||
            d.snapshot_again != r->snapshot_again || d.broad != r->broad || d.anon != r->anon ||
            d.take_addr_id != r->take || d.resume != r->resume)
            fail_msg("%s: flags authed %d stats %d again %d broad %d anon %d take %d resume %d",
                     what, d.authed, d.new_stats, d.snapshot_again, d.broad, d.anon, d.take_addr_id,
                     d.resume);
        dash_msg_cleanup(&m);
    }
}

static void test_too_many_ids(void **state)
{
    struct dash_sub_decision d;
    memset(&d, 0, sizeof(d));
    dash_subscribe_too_many_ids(5, &d);
    assert_int_equal(d.verdict, DASH_SUB_REFUSE);
    assert_string_equal(d.code, "too_many_ids");
    assert_string_equal(d.message, "at most 5 request ids nobody else watches per client "
                                   "address without the stream token");
}

/* ---- the gap rule -------------------------------------------------------------------------- */

#define P(ms, seq) ((struct svec_pos){ms, seq})

struct gap_row {
    unsigned np;
    struct svec_pos from[2];
    struct store_stream_part_info info[2];
    enum store_stream_gap want;
    int any_first;
};

static const struct gap_row gap_rows[] = {
    /* one stream: the cursor inside the retained entries */
    {1, {P(5, 0)}, {{.last = P(9, 0), .first = P(3, 0), .has_first = 1}}, STORE_STREAM_GAP_NONE, 1},
    /* newer than the stream's last id: not a cursor of this stream */
    {1,
     {P(10, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1}},
     STORE_STREAM_GAP_UNKNOWN,
     1},
    /* older than the oldest entry left: trimmed (one stream: even when nothing was removed) */
    {1,
     {P(2, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1}},
     STORE_STREAM_GAP_TRIMMED,
     1},
    {1,
     {P(0, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1, .whole = 1}},
     STORE_STREAM_GAP_TRIMMED,
     1},
    /* an XDEL'd entry after the cursor */
    {1,
     {P(5, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1, .maxdel = P(6, 0), .has_maxdel = 1}},
     STORE_STREAM_GAP_TRIMMED,
     1},
    /* an emptied stream that had entries after the cursor; an empty one that had none */
    {1, {P(5, 0)}, {{.last = P(9, 0)}}, STORE_STREAM_GAP_TRIMMED, 0},
    {1, {P(9, 0)}, {{.last = P(9, 0)}}, STORE_STREAM_GAP_NONE, 0},
    /* no stream at all: only 0-0 */
    {1, {P(0, 0)}, {{.last = P(0, 0)}}, STORE_STREAM_GAP_NONE, 0},
    /* several: a stream nothing was removed from has every entry after a 0-0 component */
    {2,
     {P(0, 0), P(5, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1, .whole = 1},
      {.last = P(9, 0), .first = P(4, 0), .has_first = 1}},
     STORE_STREAM_GAP_NONE,
     1},
    {2,
     {P(0, 0), P(5, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1},
      {.last = P(9, 0), .first = P(4, 0), .has_first = 1}},
     STORE_STREAM_GAP_TRIMMED,
     1},
    /* unknown wins over trimmed */
    {2,
     {P(0, 0), P(50, 0)},
     {{.last = P(9, 0), .first = P(3, 0), .has_first = 1},
      {.last = P(9, 0), .first = P(4, 0), .has_first = 1}},
     STORE_STREAM_GAP_UNKNOWN,
     1},
};

static void test_gap_rows(void **state)
{
    for (size_t i = 0; i < sizeof(gap_rows) / sizeof(gap_rows[0]); i++) {
        const struct gap_row *r = &gap_rows[i];
        struct svec_pos oldest[2];
        int any_first = -1;
        enum store_stream_gap g =
            store_stream_gap_check(r->info, r->np, r->from, oldest, &any_first);
        if (g != r->want || any_first != r->any_first)
            fail_msg("gap row %zu: %d any_first %d, want %d %d", i, g, any_first, r->want,
                     r->any_first);
        for (unsigned p = 0; p < r->np; p++) {
            struct svec_pos want = r->info[p].has_first ? r->info[p].first : P(0, 0);
            assert_int_equal(svec_pos_cmp(&oldest[p], &want), 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_too_many_ids),
        cmocka_unit_test(test_gap_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
