/* find.c - see find.h: the dashboard's find and facts answers. Every read carries the hub
 * (h->pending, ops.h) and names its session by number: an answer for a session that is gone
 * is dropped. A find is one search page (every partition), maybe one upstream term lookup and
 * the page again, then one read per id found; a facts answer is one read.
 * runs on: core thread. */
#include "relay/dash/find.h"
#include "protocol/dash_msg.h"
#include "protocol/event.h"
#include "relay/api/search.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/core.h"
#include "relay/dash/frames.h"
#include "relay/dash/limits.h"
#include "relay/dash/ops.h"
#include "relay/dash/table.h"
#include "relay/ingest/chains.h"
#include "store/requests.h"
#include "store/search.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the fields a row is made of */
#define ROW_FIELDS (SRF_REC | SRF_STATUS | SRF_FIRST | SRF_FACTS)

/* ---- one request's summary ------------------------------------------------------------------ */

static json_t *chain_or_null(int64_t id)
{
    return id != 0 ? json_integer(id) : json_null();
}

static json_t *member_or_null(json_t *o, const char *k)
{
    json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
    return v != NULL ? json_incref(v) : json_null();
}

/* The summary of request id (a row of a find answer, the head of a facts answer) into o:
 * status and chains from its newest record, createdAt from its facts (else first seen, as the
 * search orders it), user and recipient from its facts. facts: the request's facts (JSON, may
 * be null). */
static void put_summary(struct hub *h, json_t *o, const char *id, const struct store_request *r,
                        json_t *facts)
{
    struct status_event ev;
    status_event_init(&ev);
    struct proto_err pe;
    memset(&pe, 0, sizeof(pe));
    int have = r->rec.str != NULL && proto_event_from_record(r->rec.str, r->rec.len, &ev, &pe) == 0;
    if (r->rec.str != NULL && !have && h->frame_errors++ == 0)
        log_warn("event record unreadable, not sent to dashboards", "request=%s", id);
    json_object_set_new(o, "requestId", json_string(id));
    json_object_set_new(o, "status", have && ev.status != NULL ? json_string(ev.status)
                                     : r->status.str != NULL
                                         ? json_stringn(r->status.str, r->status.len)
                                         : json_null());
    json_object_set_new(o, "originChainId", chain_or_null(have ? ev.origin_chain_id : 0));
    json_object_set_new(o, "destinationChainId",
                        chain_or_null(have ? ev.destination_chain_id : 0));
    json_object_set_new(o, "updatedAt", have && ev.updated_at > 0 ? json_integer(ev.updated_at)
                                                                 : json_null());
    json_t *created = member_or_null(facts, "createdAt");
    if (json_is_null(created) && r->first.str != NULL) {
        json_decref(created);
        created = json_integer(strtoll(r->first.str, NULL, 10));
    }
    json_object_set_new(o, "createdAt", created);
    json_object_set_new(o, "user", member_or_null(facts, "user"));
    json_object_set_new(o, "recipient", member_or_null(facts, "recipient"));
    status_event_cleanup(&ev);
}

/* ---- find ------------------------------------------------------------------------------------ */

struct find;

struct find_row {
    struct find *f;
    size_t i;
};

struct find {
    struct hub *h;
    uint64_t sess;
    int trusted, looked_up, more, err;
    int limit;
    size_t n, pending;     /* ids found; row reads not answered yet */
    char **ids;            /* owned */
    json_t **rows;         /* per id: its row, NULL when it vanished meanwhile */
    struct find_row *args; /* per id: its read's argument */
    char q[DASH_MSG_Q_MAX + 1];
};

static void find_free(struct find *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->ids[i]);
        json_decref(f->rows[i]);
    }
    free(f->ids);
    free(f->rows);
    free(f->args);
    free(f);
}

/* The session asking, its read done: NULL when it is gone or closing. */
static struct hsess *find_sess(struct hub *h, uint64_t sess)
{
    struct hsess *x = dash_sess_find(h, sess);
    if (x != NULL && x->hist_inflight > 0)
        x->hist_inflight--;
    return x != NULL && !x->closing ? x : NULL;
}

static void find_error(struct find *f, const char *code, const char *message, json_t *data)
{
    if (data == NULL)
        data = json_object();
    json_object_set_new(data, "q", json_string(f->q));
    dash_send_error(f->h, f->sess, "find", code, message, data);
}

static void find_answer(struct find *f)
{
    struct hub *h = f->h;
    struct hsess *x = find_sess(h, f->sess);
    if (x == NULL)
        goto out;
    if (f->err) {
        find_error(f, "unavailable", "the search could not be read (Redis unavailable)", NULL);
        goto out;
    }
    json_t *list = json_array();
    for (size_t i = 0; i < f->n; i++)
        if (f->rows[i] != NULL)
            json_array_append(list, f->rows[i]);
    dash_send_json(h, x->id, NULL,
                   json_pack("{s:s,s:s,s:{s:s,s:o,s:b,s:i}}", "type", "find", "status",
                             "success", "data", "q", f->q, "requests", list, "more", f->more,
                             "limit", f->limit));
out:
    find_free(f);
}

static void on_row(void *arg, const char *err, const struct store_request *r)
{
    struct find_row *row = arg;
    struct find *f = row->f;
    struct hub *h = f->h;
    int closing = dash_enter(h);
    if (!closing && err != NULL)
        f->err = 1;
    else if (!closing && r->found) {
        json_t *facts = api_facts_json(&r->facts, NULL), *o = json_object();
        put_summary(h, o, f->ids[row->i], r, facts);
        json_decref(facts);
        f->rows[row->i] = o;
    }
    if (--f->pending > 0)
        return;
    if (closing)
        find_free(f);
    else
        find_answer(f);
}

static void find_page(struct find *f);

static void on_term(void *arg, size_t found)
{
    struct find *f = arg;
    struct hub *h = f->h;
    if (dash_enter(h)) {
        find_free(f);
        return;
    }
    log_debug("dashboard find looked up upstream", "session=%llu found=%zu",
              (unsigned long long)f->sess, found);
    f->looked_up = 1;
    find_page(f);
}

static void on_page(void *arg, const char *err, const struct store_req_ref *e, size_t n,
                    int more)
{
    struct find *f = arg;
    struct hub *h = f->h;
    if (dash_enter(h)) {
        find_free(f);
        return;
    }
    struct hsess *x = dash_sess_find(h, f->sess);
    if (x == NULL || x->closing) {
        find_sess(h, f->sess);
        find_free(f);
        return;
    }
    if (err != NULL) {
        f->err = 1;
        find_answer(f);
        return;
    }
    if (n == 0 && !f->looked_up) {
        /* unknown here: the upstream's term search, once (an anonymous client within its
         * address's miss rate, the REST API's table) */
        h->pending++;
        int rc = api_search_term_find(h->c, f->trusted ? NULL : x->addr, f->q, on_term, f);
        if (rc == 0)
            return;
        h->pending--;
        if (rc > 0) {
            char msg[160];
            snprintf(msg, sizeof(msg),
                     "too many searches for terms unknown here from this address (at most "
                     "%lld a minute without the stream token); retry in %d s",
                     (long long)h->c->cfg->anon_miss_rate, rc);
            find_sess(h, f->sess);
            find_error(f, "rate_limited", msg, json_pack("{s:i}", "retryAfter", rc));
            find_free(f);
            return;
        }
    }
    f->more = more;
    if (n == 0) {
        find_answer(f);
        return;
    }
    f->n = n;
    f->ids = xcalloc(n, sizeof(*f->ids));
    f->rows = xcalloc(n, sizeof(*f->rows));
    f->args = xcalloc(n, sizeof(*f->args));
    for (size_t i = 0; i < n; i++) {
        f->ids[i] = xstrdup(e[i].id);
        f->args[i] = (struct find_row){f, i};
    }
    f->pending = 1; /* held until every read is sent */
    for (size_t i = 0; i < n; i++) {
        h->pending++;
        f->pending++;
        if (store_request_get(h->c->store, f->ids[i], ROW_FIELDS, on_row, &f->args[i]) != 0) {
            h->pending--;
            f->pending--;
            f->err = 1;
        }
    }
    if (--f->pending == 0)
        find_answer(f);
}

static void find_page(struct find *f)
{
    struct store_search_query q = {.q = f->q, .from = -1, .to = -1, .limit = f->limit};
    f->h->pending++;
    store_search_page(f->h->c->store, &q, on_page, f); /* answers exactly once */
}

void dash_find(struct hub *h, struct hsess *x, const char *q, int trusted)
{
    struct find *f = xcalloc(1, sizeof(*f));
    f->h = h;
    f->sess = x->id;
    f->trusted = trusted;
    f->limit = trusted ? HUB_FIND_MAX : HUB_FIND_ANON_MAX;
    snprintf(f->q, sizeof(f->q), "%s", q);
    x->hist_inflight++; /* until the answer */
    find_page(f);
}

/* ---- facts ----------------------------------------------------------------------------------- */

static void on_facts(void *arg, const char *err, const struct store_request *r)
{
    struct op *op = arg;
    struct hub *h = op->h;
    if (dash_enter(h)) {
        free(op);
        return;
    }
    struct hsess *x = find_sess(h, op->sess);
    if (x == NULL) {
        free(op);
        return;
    }
    json_t *filters = json_pack("{s:s}", "id", op->id);
    if (err != NULL) {
        dash_send_error(h, x->id, "facts", "unavailable",
                        "the facts could not be read (Redis unavailable)",
                        json_pack("{s:o}", "filters", filters));
    } else if (!r->found) {
        dash_send_error(h, x->id, "facts", "not_found", "the relay does not know this request",
                        json_pack("{s:o}", "filters", filters));
    } else {
        json_t *facts = api_facts_json(&r->facts, chains_explorers(h->c->chains));
        json_t *data = json_pack("{s:o}", "filters", filters);
        put_summary(h, data, op->id, r, facts);
        json_object_set_new(data, "request", facts);
        dash_send_json(h, x->id, NULL,
                       json_pack("{s:s,s:s,s:o}", "type", "facts", "status", "success", "data",
                                 data));
    }
    free(op);
}

void dash_facts(struct hub *h, struct hsess *x, const char *id)
{
    struct op *op = dash_op_new(h, x->id, 0, id);
    h->pending++;
    x->hist_inflight++; /* until on_facts */
    if (store_request_get(h->c->store, id, ROW_FIELDS, on_facts, op) != 0) {
        h->pending--;
        x->hist_inflight--;
        free(op);
        dash_send_error(h, x->id, "facts", "unavailable",
                        "the facts could not be read (Redis unavailable)",
                        json_pack("{s:{s:s}}", "filters", "id", id));
    }
}
