/* fuzz_normalize_ws.c - libFuzzer target for proto_normalize_ws (upstream websocket frames:
 * envelopes A and B, control frames). Invariants: see proto_fuzz.h; control frames leave the
 * event empty and their ids are NUL-terminated within their buffers.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct status_event ev;
    struct proto_ws_msg msg;
    struct proto_err err;
    int rc = proto_normalize_ws((const char *)data, size, FUZZ_NOW, &msg, &ev, &err);
    fuzz_check_rc(rc, &err, &ev);
    fuzz_diff_json(data, size, rc, &err);
    if (rc == 0 && msg.kind == PROTO_WS_EVENT) {
        FUZZ_CHECK(ev.source == PROTO_SRC_WS && ev.observed_at == FUZZ_NOW);
        FUZZ_CHECK(ev.fail_reason != NULL && ev.refund_fail_reason != NULL);
        fuzz_check_event(&ev);
    } else if (rc == 0) {
        FUZZ_CHECK(msg.kind <= PROTO_WS_CONTROL && ev.request_id == NULL);
        FUZZ_CHECK(memchr(msg.ctl_id, '\0', sizeof(msg.ctl_id)) != NULL);
        FUZZ_CHECK(memchr(msg.ctl_status, '\0', sizeof(msg.ctl_status)) != NULL);
    }
    status_event_cleanup(&ev);
    return 0;
}
