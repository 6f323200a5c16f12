/* fuzz_normalize_status.c - libFuzzer target for proto_normalize_status_v3 (GET
 * /intents/status/v3 bodies). The first byte picks the caller's request id (valid, empty, bad
 * characters, 128 and 129 chars); the rest is the body. Invariants: see proto_fuzz.h.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char id128[PROTO_MAX_ID + 1], id129[PROTO_MAX_ID + 2];
    if (id128[0] == '\0') {
        memset(id128, 'a', PROTO_MAX_ID);
        memset(id129, 'b', PROTO_MAX_ID + 1);
    }
    const char *ids[] = {"0x2d56d3588be531e719518bd81f9bdea27ab103b4c97bc1e54387182c64273cd3",
                         "", "bad id", id128, id129, "r:1.x_y-z"};
    const char *id = ids[0];
    if (size > 0 && data[0] < 6) {
        id = ids[data[0]];
        data++;
        size--;
    }
    struct status_event ev;
    struct proto_err err;
    int rc = proto_normalize_status_v3((const char *)data, size, id, FUZZ_NOW, &ev, &err);
    fuzz_check_rc(rc, &err, &ev);
    if (rc == 0) {
        FUZZ_CHECK(strcmp(ev.request_id, id) == 0 && ev.source == PROTO_SRC_POLL);
        FUZZ_CHECK(ev.fail_reason != NULL && ev.refund_fail_reason != NULL);
        fuzz_check_event(&ev);
    }
    if (id == ids[0])
        fuzz_diff_json(data, size, rc, &err);
    status_event_cleanup(&ev);
    return 0;
}
