/* fuzz_normalize_requests.c - libFuzzer target for GET /requests/v3: the whole-page walker
 * (proto_normalize_requests_page) and the single-item normaliser on the same bytes.
 * Invariants: see proto_fuzz.h; every accepted item passes fuzz_check_event; failed items
 * arrive empty; the continuation is NULL or a non-empty string.
 * runs on: the fuzzer process, one thread. */
#include "tests/fuzz/proto_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_item(void *arg, int rc, struct status_event *ev, const struct proto_err *err)
{
    ++*(size_t *)arg;
    fuzz_check_rc(rc, err, ev);
    if (rc == 0) {
        FUZZ_CHECK(ev->source == PROTO_SRC_REQUESTS && ev->published_at == 0);
        fuzz_check_event(ev);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct status_event ev;
    struct proto_err err;
    char *cont = (char *)&err; /* must be overwritten */
    size_t items = 0;
    int rc = proto_normalize_requests_page((const char *)data, size, FUZZ_NOW, on_item, &items,
                                           &cont, &err);
    FUZZ_CHECK(rc <= 0 && rc >= PROTO_EEVENT && rc != PROTO_ENOMEM);
    FUZZ_CHECK(rc == 0 || (cont == NULL && err.code == rc));
    FUZZ_CHECK(cont == NULL || strlen(cont) > 0);
    free(cont);
    fuzz_diff_json(data, size, rc, &err);

    rc = proto_normalize_requests_item((const char *)data, size, FUZZ_NOW, &ev, &err);
    fuzz_check_rc(rc, &err, &ev);
    if (rc == 0)
        fuzz_check_event(&ev);
    status_event_cleanup(&ev);
    return 0;
}
