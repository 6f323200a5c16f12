/* backfill.c (api) - POST /v1/backfill and GET /v1/backfill/{id} (DESIGN "Discovery and
 * backfill"): read a window of the changes feed again (relay/ingest/feed.c runs it in this
 * process, within the budget) and report its progress from Redis (any process answers).
 *
 *   POST {"since": ms, "until"?: ms}  -> 202 {"backfillId", "since", "until"}
 *   GET  /v1/backfill/{id}            -> 200 {"backfillId", "since", "until", "createdAt",
 *                                         "pages", "items", "applied", "done", "error"}
 *
 * runs on: core thread. */
#include "relay/api/internal.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/ingest/feed.h"
#include "store/feed.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* A time in ms: a non-negative JSON integer. */
static int take_ms(json_t *v, int64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = (int64_t)json_integer_value(v);
    return 0;
}

void api_h_backfill_post(struct ctx *x)
{
    json_t *in = api_parse_body(x);
    if (in == NULL)
        return;
    int64_t since = 0, until = -1, now = wall_ms();
    json_t *u = json_object_get(in, "until");
    if (!json_is_object(in) || take_ms(json_object_get(in, "since"), &since) != 0) {
        api_reply_error(x, 400, "invalid_parameter", "since",
                        "since must be a time in unix milliseconds");
    } else if (u != NULL && !json_is_null(u) && take_ms(u, &until) != 0) {
        api_reply_error(x, 400, "invalid_parameter", "until",
                        "until must be a time in unix milliseconds or null");
    } else if (since > now || (until >= 0 && until < since)) {
        api_reply_error(x, 400, "invalid_parameter", until >= 0 && until < since ? "until" : "since",
                        "the window must start in the past and end after it starts");
    } else if (x->api->c->cfg->upstream_api_key == NULL) {
        api_reply_error(x, 409, "no_api_key", NULL,
                        "backfill reads /requests/v3, which needs STATUSRELAY_UPSTREAM_API_KEY");
    } else {
        char id[FEED_BACKFILL_ID_MAX];
        if (feed_backfill_start(x->api->c->feed, since, until, id) != 0) {
            api_reply_unavailable(x, "cannot start the backfill");
        } else {
            json_t *out = json_pack("{s:s, s:I, s:o}", "backfillId", id, "since",
                                    (json_int_t)since, "until",
                                    until >= 0 ? json_integer(until) : json_null());
            api_reply_json(x, 202, out);
        }
    }
    json_decref(in);
}

static void on_backfill(void *arg, const char *err, const struct feed_backfill *b)
{
    struct ctx *x = arg;
    if (x->api == NULL || x->req == NULL) {
        api_ctx_free(x);
        return;
    }
    if (err != NULL) {
        api_reply_unavailable(x, "cannot read the backfill");
        return;
    }
    if (b == NULL) {
        api_reply_error(x, 404, "not_found", NULL, "backfill %s is not known", x->id);
        return;
    }
    json_t *out = json_pack(
        "{s:s, s:I, s:o, s:I, s:I, s:I, s:I, s:b, s:o}", "backfillId", x->id, "since",
        (json_int_t)b->since_ms, "until", b->until_ms >= 0 ? json_integer(b->until_ms) : json_null(),
        "createdAt", (json_int_t)b->created_ms, "pages", (json_int_t)b->pages, "items",
        (json_int_t)b->items, "applied", (json_int_t)b->applied, "done", b->done, "error",
        b->error != NULL && b->error[0] != '\0' ? json_string(b->error) : json_null());
    api_reply_json(x, 200, out);
}

void api_h_backfill_get(struct ctx *x)
{
    const char *id = x->param[0];
    size_t n = x->param_len[0];
    if (n < 4 || n >= FEED_BACKFILL_ID_MAX || strncmp(id, "bf_", 3) != 0 ||
        strspn(id + 3, "0123456789abcdef") != n - 3) {
        api_reply_error(x, 404, "not_found", NULL, "backfill %.60s is not known", id);
        return;
    }
    snprintf(x->id, sizeof(x->id), "%s", id);
    if (feed_backfill_get(x->api->c->store, x->id, on_backfill, x) != 0)
        api_reply_unavailable(x, "cannot read the backfill");
}
