/* requests.h - the request records as the REST views read them: one request's hash
 * {P}:req:<id> (fields chosen by the caller, one HMGET), a page of a request index ({P}:ct,
 * {P}:st:<status>, {P}:act) merged over every partition, and the hashes of a page's ids read
 * partition by partition (store/requests_page.lua, store/requests_read.lua). The field names
 * and the scripts' argument and reply layouts are written here only; a deployment of one
 * partition is the degenerate case (one command each). The hashes are written by
 * store/apply.lua and the tracking scripts (store/keys.h names every field).
 * runs on: core thread. */
#ifndef STORE_REQUESTS_H
#define STORE_REQUESTS_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* One field's value: str NULL when the hash has no such field (or it was not asked for).
 * Borrowed from the reply: valid during the callback only. */
struct store_field {
    const char *str;
    size_t len;
};

/* The fields a reader may ask for (a mask of them). */
enum store_req_field {
    SRF_REC = 1 << 0,    /* the newest event record (proto_event_record form; inflated here
                          * when stored deflated: store/rec.h) */
    SRF_SEQ = 1 << 1,    /* its seq (decimal) */
    SRF_STATUS = 1 << 2, /* the status name */
    SRF_META = 1 << 3,   /* the tracking metadata (compact JSON) */
    SRF_FIRST = 1 << 4,  /* first seen (ms) */
    SRF_TRK = 1 << 5,    /* "1" when tracked through the API */
    SRF_SRC = 1 << 6,    /* the source of the newest record */
    SRF_WATCH = 1 << 7,  /* the watch phase ("active", "settled", ...; none: ended) */
    SRF_WU = 1 << 8,     /* watched until (ms) */
    SRF_CF = 1 << 9,     /* when the upstream last confirmed the state (ms) */
    SRF_FACTS = 1 << 10, /* the request facts as stored (store/facts.h: store_facts_decode) */
};
/* The fields of the REST shape of a request (GET /v1/requests[/{id}]). */
#define SRF_REST                                                                               \
    (SRF_REC | SRF_SEQ | SRF_STATUS | SRF_META | SRF_FIRST | SRF_TRK | SRF_SRC | SRF_WATCH |   \
     SRF_WU)

struct store_request {
    int found;   /* any field asked for is present (the request is known) */
    int tracked; /* trk is "1" */
    struct store_field rec, seq, status, meta, first, trk, src, watch, wu, cf, facts;
    char *rec_own; /* the module's: rec inflated from its stored form (store/rec.h), freed
                    * after the callback; rec points into it */
};

/* One request: r NULL when err is set (a named store error). */
typedef void store_request_cb(void *arg, const char *err, const struct store_request *r);
/* Read the fields (a mask of enum store_req_field) of request id's hash, in its partition.
 * Returns 0 (cb is called exactly once, later) or -1 when the store is not ready (cb is not
 * called). */
int store_request_get(struct store *s, const char *id, unsigned fields, store_request_cb *cb,
                      void *arg);

/* Which index a page lists (ct and st by creation time, act by last change: ms, then id
 * bytes). */
enum store_req_index {
    STORE_REQ_ALL = 0, /* every known request ({P}:ct) */
    STORE_REQ_STATUS,  /* the requests now in one status ({P}:st:<status>) */
    STORE_REQ_STUCK,   /* active ones whose status is unchanged since max ({P}:act) */
};
struct store_req_query {
    enum store_req_index index;
    const char *status;     /* STORE_REQ_STATUS: the status name */
    int64_t max;            /* STORE_REQ_STUCK: the newest last-change time listed (ms) */
    const char *after_score; /* the cursor: list strictly after (score, id); "" or NULL: */
    const char *after_id;    /* from the start */
    int limit;               /* >= 1 */
};
/* One listed request: its id and score (decimal ms), borrowed for the callback. */
struct store_req_ref {
    const char *id;
    const char *score;
};
/* A page in index order: e[0..n), n <= limit; more is 1 when the index holds more after it.
 * err set (a named store error, store/gather.h): n 0. */
typedef void store_req_page_cb(void *arg, const char *err, const struct store_req_ref *e,
                               size_t n, int more);
/* A page of q's index, merged over every partition. cb is called exactly once, maybe before
 * this returns (store_err_unsent when the store is not ready). */
void store_requests_page(struct store *s, const struct store_req_query *q,
                         store_req_page_cb *cb, void *arg);

/* Each request of a read: i is its index in the ids given, r its REST fields (SRF_REST). */
typedef void store_request_each_fn(void *arg, size_t i, const struct store_request *r);
/* The end of a read: err NULL when every record was read. */
typedef void store_requests_done_cb(void *arg, const char *err);
/* Read the SRF_REST fields of ids[0..n) (requests_read.lua, one call per partition holding
 * any, one snapshot each): each is called once per id answered, then done exactly once, maybe
 * before this returns. ids is read during the call only. */
void store_requests_read(struct store *s, const char *const *ids, size_t n,
                         store_request_each_fn *each, store_requests_done_cb *done, void *arg);

#endif
