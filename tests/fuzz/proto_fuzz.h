/* proto_fuzz.h - invariants shared by the protocol/ libFuzzer targets.
 *
 * For every input: the return code is a known PROTO_E* and matches err->code; a rejected
 * input leaves *out empty; the JSON reader agrees with jansson (an independent parser) on
 * what is JSON, except for its documented differences (PROTO_MAX_DEPTH, numbers that
 * overflow C types). For every accepted event: the record round-trips exactly; the first
 * lifecycle decision accepts it and a repeat is a duplicate; the webhook body, dashboard
 * frame and status v3 body are valid JSON (jansson, duplicates rejected; numbers jansson
 * cannot hold are allowed, as JSON-typed details and reorg details carry the input's own),
 * never carry a null reason, and normalise back to the same upstream fields (failReason as
 * proto_fail_reason_out shows it: the lifecycle applies the status-response rule).
 * runs on: the fuzzer process, one thread. */
#ifndef TESTS_FUZZ_PROTO_FUZZ_H
#define TESTS_FUZZ_PROTO_FUZZ_H

#include "protocol/lifecycle.h"
#include "tests/fuzz/fuzz_check.h"
#include "protocol/normalize.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_NOW 1787000000000LL

static void fuzz_check_rc(int rc, const struct proto_err *err, const struct status_event *ev)
{
    FUZZ_CHECK(rc <= 0 && rc >= PROTO_EEVENT && rc != PROTO_ENOMEM);
    if (rc != 0) {
        FUZZ_CHECK(err->code == rc);
        FUZZ_CHECK(memchr(err->field, '\0', sizeof(err->field)) != NULL);
        FUZZ_CHECK(memchr(err->msg, '\0', sizeof(err->msg)) != NULL);
        FUZZ_CHECK(ev->request_id == NULL && ev->status == NULL && ev->fail_reason == NULL &&
                   ev->deposit == NULL && ev->in_tx_hashes.n == 0);
    }
}

/* The protocol reader and jansson agree on what is JSON. rc: a normaliser's result on the
 * same bytes (PROTO_EJSON exactly when the reader refused them). */
static void fuzz_diff_json(const uint8_t *data, size_t size, int rc, const struct proto_err *err)
{
    if (size > PROTO_MAX_INPUT)
        return;
    /* a raw NUL byte is never JSON; jansson 2.14 accepts one after a number or at the end */
    if (memchr(data, '\0', size) != NULL) {
        FUZZ_CHECK(rc == PROTO_EJSON);
        return;
    }
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
                           &jerr);
    int ours = rc != PROTO_EJSON;
    if (!ours && j != NULL)
        FUZZ_CHECK(strstr(err->msg, "nesting too deep") != NULL);
    if (ours && j == NULL)
        FUZZ_CHECK(json_error_code(&jerr) == json_error_numeric_overflow);
    json_decref(j);
}

static int fuzz_str_eq(const char *a, const char *b)
{
    return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

static int fuzz_strv_eq(const struct proto_strv *a, const struct proto_strv *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0)
            return 0;
    return 1;
}

static const char *fuzz_reason(const char *r)
{
    return r != NULL ? r : "N/A";
}

/* The fields an upstream-shaped encoding carries came back unchanged. */
static void fuzz_same_upstream(const struct status_event *a, const struct status_event *b,
                               int with_id_deposit)
{
    FUZZ_CHECK(strcmp(a->status, b->status) == 0);
    FUZZ_CHECK(a->updated_at == b->updated_at);
    FUZZ_CHECK(a->origin_chain_id == b->origin_chain_id);
    FUZZ_CHECK(a->destination_chain_id == b->destination_chain_id);
    FUZZ_CHECK(fuzz_strv_eq(&a->in_tx_hashes, &b->in_tx_hashes));
    FUZZ_CHECK(fuzz_strv_eq(&a->tx_hashes, &b->tx_hashes));
    FUZZ_CHECK(strcmp(proto_fail_reason_out(a), proto_fail_reason_out(b)) == 0);
    FUZZ_CHECK(strcmp(fuzz_reason(a->refund_fail_reason), fuzz_reason(b->refund_fail_reason)) ==
               0);
    FUZZ_CHECK(fuzz_str_eq(a->details, b->details));
    FUZZ_CHECK(a->details == NULL ||
               ((a->flags ^ b->flags) & PROTO_HAS_DETAILS_JSON) == 0);
    if (!with_id_deposit)
        return;
    FUZZ_CHECK(strcmp(a->request_id, b->request_id) == 0);
    FUZZ_CHECK(fuzz_str_eq(a->referrer, b->referrer));
    FUZZ_CHECK((a->deposit == NULL) == (b->deposit == NULL));
    if (a->deposit != NULL) {
        FUZZ_CHECK(fuzz_str_eq(a->deposit->address, b->deposit->address));
        FUZZ_CHECK(fuzz_str_eq(a->deposit->type, b->deposit->type));
        FUZZ_CHECK(fuzz_str_eq(a->deposit->depositor, b->deposit->depositor));
        FUZZ_CHECK(fuzz_str_eq(a->deposit->deposit_tx_hash, b->deposit->deposit_tx_hash));
    }
}

static void fuzz_valid_json(const char *text, size_t len)
{
    json_error_t jerr;
    FUZZ_CHECK(text != NULL && strlen(text) == len);
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    /* an input's number beyond jansson's types is kept verbatim (JSON-typed details) */
    int overflow = j == NULL && json_error_code(&jerr) == json_error_numeric_overflow;
    if (j == NULL && !overflow)
        fprintf(stderr, "encoder output is not JSON: %s\n%.500s\n", jerr.text, text);
    FUZZ_CHECK(overflow || (j != NULL && json_is_object(j)));
    /* upstream shapes (the reasons at the top or in "data") never carry a null reason; the
     * record may, and reorg metadata holds whatever the upstream sent; an endpoint.disabled
     * (its record or its body) has no request and no reasons */
    const json_t *type = j != NULL ? json_object_get(j, "event") : NULL;
    int no_request =
        json_is_object(type) ||
        (json_is_string(type) && strcmp(json_string_value(type), "endpoint.disabled") == 0);
    if (j != NULL && !no_request && strncmp(text, "{\"requestId\"", 12) != 0) {
        json_t *d = json_object_get(j, "data") != NULL ? json_object_get(j, "data") : j;
        FUZZ_CHECK(json_is_string(json_object_get(d, "failReason")) &&
                   json_is_string(json_object_get(d, "refundFailReason")));
    }
    json_decref(j);
}

/* Record: decode(encode(ev)) == ev and encode(decode(...)) is byte-identical. */
static void fuzz_check_record(const struct status_event *ev)
{
    size_t len, len2;
    struct status_event back;
    struct proto_err err;
    char *rec = proto_event_record(ev, &len);
    fuzz_valid_json(rec, len);
    int rc = proto_event_from_record(rec, len, &back, &err);
    if (rc != 0)
        fprintf(stderr, "record rejected: %s %s %s\n%.500s\n", proto_strerror(rc), err.field,
                err.msg, rec);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(status_event_equal(ev, &back));
    char *rec2 = proto_event_record(&back, &len2);
    FUZZ_CHECK(rec2 != NULL && len == len2 && memcmp(rec, rec2, len) == 0);
    free(rec);
    free(rec2);
    status_event_cleanup(&back);
}

/* Every invariant of an accepted event (normalised or decoded from a record). */
static void fuzz_check_event(const struct status_event *ev)
{
    FUZZ_CHECK(ev->request_id != NULL && proto_request_id_valid(ev->request_id,
                                                                 strlen(ev->request_id)));
    FUZZ_CHECK(ev->status != NULL && ev->st == proto_status_parse(ev->status));
    FUZZ_CHECK(ev->updated_at >= 1 && ev->updated_at <= PROTO_MAX_TS);
    FUZZ_CHECK(ev->in_tx_hashes.n <= PROTO_MAX_HASHES && ev->tx_hashes.n <= PROTO_MAX_HASHES);
    for (size_t i = 0; i < ev->in_tx_hashes.n; i++)
        FUZZ_CHECK(proto_hash_valid(ev->in_tx_hashes.v[i], strlen(ev->in_tx_hashes.v[i])));
    FUZZ_CHECK(ev->details == NULL || strlen(ev->details) <= PROTO_MAX_STR);
    fuzz_check_record(ev);

    /* lifecycle: the first observation is an event; the same one again is a duplicate */
    struct status_event next, again;
    enum proto_verdict v;
    FUZZ_CHECK(proto_lifecycle_decide(NULL, ev, FUZZ_NOW, &v, &next) == 0 && v == PROTO_ACCEPT);
    FUZZ_CHECK(next.seq == 1 && next.prev_status == NULL && strlen(next.event_id) == 36);
    fuzz_same_upstream(ev, &next, 1);
    FUZZ_CHECK(proto_lifecycle_decide(&next, ev, FUZZ_NOW, &v, &again) == 0 &&
               v == PROTO_DUPLICATE && again.request_id == NULL);
    fuzz_check_record(&next);

    /* upstream shapes: valid JSON that normalises back to the same upstream fields */
    size_t len;
    struct status_event back;
    struct proto_ws_msg msg;
    struct proto_err err;
    char *text = proto_event_webhook_body(&next, &len);
    fuzz_valid_json(text, len);
    FUZZ_CHECK(proto_normalize_webhook(text, len, FUZZ_NOW, &back, &err) == 0);
    fuzz_same_upstream(&next, &back, 1);
    FUZZ_CHECK(back.published_at == FUZZ_NOW);
    status_event_cleanup(&back);
    free(text);

    text = proto_event_ws_frame(&next, 1, FUZZ_NOW + 1, &len);
    fuzz_valid_json(text, len);
    FUZZ_CHECK(proto_normalize_ws(text, len, FUZZ_NOW, &msg, &back, &err) == 0);
    FUZZ_CHECK(msg.kind == PROTO_WS_EVENT && back.published_at == FUZZ_NOW + 1);
    fuzz_same_upstream(&next, &back, 1);
    status_event_cleanup(&back);
    free(text);

    text = proto_event_status_v3(&next, &len);
    fuzz_valid_json(text, len);
    FUZZ_CHECK(proto_normalize_status_v3(text, len, next.request_id, FUZZ_NOW, &back, &err) == 0);
    fuzz_same_upstream(&next, &back, 0);
    FUZZ_CHECK(back.quote_created_at == next.quote_created_at);
    status_event_cleanup(&back);
    free(text);
    status_event_cleanup(&next);
}

#endif
