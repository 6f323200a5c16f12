/* fuzz_event_record.c - libFuzzer target for the storage record (proto_event_from_record, as
 * read back from Redis) and, through fuzz_check_event, the encoders and the lifecycle on
 * whatever a record can hold. Invariants: see proto_fuzz.h; in addition an accepted record
 * re-encodes to bytes that decode to the same event, and an older copy of it is stale; an
 * endpoint.disabled record (no request) only re-encodes and renders valid JSON.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct status_event ev;
    struct proto_err err;
    int rc = proto_event_from_record((const char *)data, size, &ev, &err);
    fuzz_check_rc(rc, &err, &ev);
    fuzz_diff_json(data, size, rc, &err);
    if (rc == 0 && ev.type == PROTO_EV_ENDPOINT_DISABLED) {
        /* no request: its own shapes, valid JSON, and the record round-trips */
        size_t len;
        char *text = proto_event_webhook_body(&ev, &len);
        fuzz_valid_json(text, len);
        free(text);
        text = proto_event_ws_frame(&ev, 0, FUZZ_NOW, &len);
        fuzz_valid_json(text, len);
        free(text);
        fuzz_check_record(&ev);
    } else if (rc == 0) {
        fuzz_check_event(&ev);
        if (ev.updated_at > 1) {
            struct status_event older, next;
            enum proto_verdict v;
            FUZZ_CHECK(status_event_copy(&older, &ev) == 0);
            older.updated_at--;
            FUZZ_CHECK(proto_lifecycle_decide(&ev, &older, FUZZ_NOW, &v, &next) == 0 &&
                       v == PROTO_STALE && next.request_id == NULL);
            status_event_cleanup(&older);
        }
    }
    status_event_cleanup(&ev);
    return 0;
}
