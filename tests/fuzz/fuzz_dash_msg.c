/* fuzz_dash_msg.c - libFuzzer target for protocol/dash_msg.c: dashboard client frames
 * (subscribe, unsubscribe, history, find, facts) as a client would send them.
 *
 * Properties: never crashes or leaks; the result is a known error; a fault names its code
 * and message, has a stage that fits its message type (FIELDS and TARGET only for subscribe)
 * and a frame type exactly when the message type was read; an accepted message is
 * consistent: a valid request id for an id target, a broad filter whose canonical JSON reads
 * back equal, a lastEventId that is a stream id, a snapshotLimit in range, a find term of
 * 1..DASH_MSG_Q_MAX printable bytes without spaces (only for find); parsing is
 * deterministic (the same bytes give the same answer). The same bytes are read again as for a
 * 3-partition deployment: accepted there, a lastEventId is a vector of exactly 3 stream ids,
 * and the message reads the same apart from the cursor. An accepted broad filter matches the
 * event made of the first value of each of its lists and its own metadata (with a 0x wallet
 * in another case too).
 * runs on: the fuzzer's thread. */
#include "tests/fuzz/fuzz_check.h"
#include "protocol/dash_msg.h"
#include "protocol/stream_vec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fault(const struct dash_msg *m, enum dash_msg_error e)
{
    FUZZ_CHECK(e > DASH_MSG_OK && e < DASH_MSG_ENOMEM);
    FUZZ_CHECK(m->fault.code != NULL && m->fault.message != NULL && m->fault.message[0] != '\0');
    FUZZ_CHECK(m->fault.stage >= DASH_STAGE_EARLY && m->fault.stage <= DASH_STAGE_TARGET);
    FUZZ_CHECK((m->type == 0) == (m->fault.type == NULL));
    FUZZ_CHECK(m->fault.stage == DASH_STAGE_EARLY || m->type == DASH_MSG_SUBSCRIBE);
    if (m->type == 0)
        FUZZ_CHECK(e == DASH_MSG_BAD_JSON || e == DASH_MSG_NO_TYPE || e == DASH_MSG_UNKNOWN_TYPE);
    FUZZ_CHECK(proto_filter_is_all(&m->filter));
}

/* f matches the event made of its own first values (dashboard lists are never empty). */
static void check_self_match(const struct proto_filter *f)
{
    char wallet[PROTO_FILTER_MAX_WALLET + 1] = "";
    const char *w[1] = {wallet};
    const char *fl[1] = {f->flags ? f->flags[0] : NULL};
    if (f->users != NULL) {
        snprintf(wallet, sizeof(wallet), "%s", f->users[0]);
        if (wallet[0] == '0' && (wallet[1] == 'x' || wallet[1] == 'X'))
            for (char *p = wallet + 2; *p; p++) /* another case: still the same address */
                *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    }
    struct proto_filter_subject s = {
        .status = f->status ? f->status[0] : "x",
        .request_id = f->request_ids ? f->request_ids[0] : NULL,
        .origin = f->origin ? f->origin[0] : 0,
        .dest = f->dest ? f->dest[0] : 0,
        .fail_reason = f->fail_reasons ? f->fail_reasons[0] : NULL,
        .refund_fail_reason = f->refund_fail_reasons ? f->refund_fail_reasons[0] : NULL,
        .flags = fl,
        .nflags = f->flags ? 1 : 0,
        .wallets = w,
        .nwallets = f->users ? 1 : 0,
        .referrer = f->referrers ? f->referrers[0] : NULL,
        .metadata = f->metadata,
    };
    FUZZ_CHECK(proto_filter_match(f, &s) == 1);
}

static void check_ok(const struct dash_msg *m, unsigned parts)
{
    FUZZ_CHECK(m->root != NULL);
    FUZZ_CHECK(m->type >= DASH_MSG_SUBSCRIBE && m->type <= DASH_MSG_FACTS);
    int by_id = m->type == DASH_MSG_HISTORY || m->type == DASH_MSG_FACTS;
    if (m->type == DASH_MSG_SUBSCRIBE || m->type == DASH_MSG_UNSUBSCRIBE)
        FUZZ_CHECK(m->event == DASH_EVENT_STATUS || m->event == DASH_EVENT_STATS);
    else
        FUZZ_CHECK(m->event == 0);
    FUZZ_CHECK((m->q != NULL) == (m->type == DASH_MSG_FIND));
    if (m->q != NULL) {
        size_t n = strlen(m->q);
        FUZZ_CHECK(n >= 1 && n <= DASH_MSG_Q_MAX && m->target == 0);
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK((unsigned char)m->q[i] > ' ' && (unsigned char)m->q[i] < 0x7f);
    }
    if (m->event == DASH_EVENT_STATS || by_id || m->type == DASH_MSG_FIND)
        FUZZ_CHECK(proto_filter_is_all(&m->filter));
    if (m->type == DASH_MSG_SUBSCRIBE) {
        FUZZ_CHECK(m->limit >= 0 && m->limit <= DASH_MSG_SNAPSHOT_MAX);
        FUZZ_CHECK(m->token == NULL || m->token_present);
        if (m->from != NULL && parts > 1) {
            struct svec_pos v[SVEC_MAX];
            FUZZ_CHECK(strlen(m->from) < SVEC_TEXT_MAX);
            FUZZ_CHECK(svec_parse(m->from, v, SVEC_MAX) == (int)parts);
        } else if (m->from != NULL) {
            uint64_t ms, seq;
            FUZZ_CHECK(strlen(m->from) < DASH_MSG_SID_MAX);
            FUZZ_CHECK(proto_stream_id_parse(m->from, &ms, &seq) == 0);
        }
        if (m->event == DASH_EVENT_STATUS)
            FUZZ_CHECK(m->target == DASH_TARGET_ID || m->target == DASH_TARGET_BROAD);
    }
    if (by_id)
        FUZZ_CHECK(m->target == DASH_TARGET_ID);
    if (m->target == DASH_TARGET_ID)
        FUZZ_CHECK(m->id != NULL && proto_request_id_valid(m->id, strlen(m->id)));
    if (m->target == DASH_TARGET_BROAD) { /* the canonical form reads back the same */
        json_t *j = proto_filter_to_json(&m->filter);
        FUZZ_CHECK(j != NULL);
        struct proto_filter again;
        const char *why = NULL;
        FUZZ_CHECK(dash_msg_filter(j, &again, &why) == 0);
        FUZZ_CHECK(proto_filter_equal(&m->filter, &again));
        proto_filter_cleanup(&again);
        json_decref(j);
        check_self_match(&m->filter);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dash_msg m, m2;
    enum dash_msg_error e = dash_msg_parse(data, size, &m);
    FUZZ_CHECK(e != DASH_MSG_ENOMEM);
    if (e == DASH_MSG_OK)
        check_ok(&m, 1);
    else
        check_fault(&m, e);
    enum dash_msg_error e2 = dash_msg_parse(data, size, &m2);
    FUZZ_CHECK(e2 == e && m2.type == m.type && m2.event == m.event && m2.target == m.target &&
               m2.fault.code == m.fault.code && m2.fault.message == m.fault.message);
    dash_msg_cleanup(&m2);
    enum dash_msg_error e3 = dash_msg_parse_parts(data, size, 3, &m2);
    FUZZ_CHECK(e3 != DASH_MSG_ENOMEM);
    if (e3 == DASH_MSG_OK)
        check_ok(&m2, 3);
    else
        check_fault(&m2, e3);
    /* only the cursor reads differently */
    FUZZ_CHECK(m2.type == m.type && m2.event == m.event);
    FUZZ_CHECK(e3 == e || e3 == DASH_MSG_BAD_CURSOR || e == DASH_MSG_BAD_CURSOR);
    dash_msg_cleanup(&m2);
    dash_msg_cleanup(&m);
    return 0;
}
