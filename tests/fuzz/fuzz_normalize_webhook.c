/* fuzz_normalize_webhook.c - libFuzzer target for proto_normalize_webhook (the upstream's own
 * webhook bodies received at /v1/ingest/upstream). Invariants: see proto_fuzz.h.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct status_event ev;
    struct proto_err err;
    int rc = proto_normalize_webhook((const char *)data, size, FUZZ_NOW, &ev, &err);
    fuzz_check_rc(rc, &err, &ev);
    fuzz_diff_json(data, size, rc, &err);
    if (rc == 0) {
        FUZZ_CHECK(ev.source == PROTO_SRC_WEBHOOK && ev.observed_at == FUZZ_NOW);
        FUZZ_CHECK(ev.fail_reason != NULL && ev.refund_fail_reason != NULL);
        fuzz_check_event(&ev);
    }
    status_event_cleanup(&ev);
    return 0;
}
