/* webhooks.h - webhook endpoints: the model, validation, secrets, the Redis CRUD, filters,
 * and the endpoint set that the fan-out and the dispatcher read. The service that owns all
 * three is relay/delivery/delivery.h (it sits above them: this module knows neither).
 *
 * Every process keeps a copy of the endpoint set (sorted by id), loaded atomically with a
 * version number ({P}:whv, bumped by every change). Fan-out passes the version it matched
 * against to its Lua script, which refuses when the set moved on; the process then reloads
 * and matches again, so an event is never fanned out against a stale endpoint set.
 *
 * An endpoint is refcounted: the set holds one reference, every delivery attempt in flight
 * another, so a reload or delete never frees an endpoint under an attempt. A reload updates
 * surviving endpoints in place (the dispatcher's per-endpoint AIMD state stays).
 * runs on: core thread. */
#ifndef RELAY_WEBHOOKS_H
#define RELAY_WEBHOOKS_H

#include "protocol/event.h"
#include "protocol/sign.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct core;
struct store_script;
struct attempt; /* relay/delivery/dispatch.c */

#define WH_ID_MAX 40             /* "wh_" + 24 hex + NUL, with room */
#define WH_DESC_MAX 1024         /* description length */
#define WH_MAX_HEADERS 32        /* custom headers per endpoint */
#define WH_MAX_FILTER_VALUES 1000 /* values per filter list */
#define WH_RETENTION_MS (7LL * 24 * 3600 * 1000) /* finished deliveries and bodies */
#define WH_LIST_CAP 100000       /* deliveries listed per endpoint (oldest trimmed) */
#define WH_CWND_START 4          /* initial AIMD window of an endpoint (capped by the setting) */

enum wh_scheme { WH_SCHEME_STANDARD = 0, WH_SCHEME_UPSTREAM, WH_SCHEME_BOTH };

struct webhook_filters {
    char **status;      /* owned strings; OR within the list */
    size_t nstatus;
    char **request_ids;
    size_t nrequest_ids;
    int64_t *origin;
    size_t norigin;
    int64_t *dest;
    size_t ndest;
};

struct webhook {
    int refs;
    char id[WH_ID_MAX];
    char *url;             /* as registered (API output) */
    char *target;          /* canonical form handed to the HTTP client */
    char *description;     /* "" when none */
    char *filters_json;    /* canonical JSON object text as stored */
    char *headers_json;    /* canonical JSON object text as stored */
    char **header_lines;   /* "Name: value", NULL-terminated */
    struct webhook_filters f;
    int enabled;
    int latest;            /* delivery mode "latest": superseded states are skipped */
    int ed25519;           /* signing "ed25519": v1a signatures, public key in the API */
    enum wh_scheme scheme;
    char *secret;          /* whsec_... (for ed25519: the seed in the same form) */
    char *prev_secret;     /* NULL when none */
    int64_t prev_expires;  /* ms: previous secret signs until then */
    struct proto_hmac *hmac, *prev_hmac;       /* Standard Webhooks keys (decoded secret) */
    struct proto_hmac *up_hmac;                /* upstream scheme: key = the secret text */
    unsigned char seed[PROTO_ED25519_SEED], prev_seed[PROTO_ED25519_SEED];
    char public_key[PROTO_WHPK_MAX];           /* ed25519 only */
    int64_t created_at;    /* ms */
    int64_t fail_since;    /* ms of the first failure since the last success; 0 none */
    int64_t disabled_at;   /* ms; 0 when enabled or never disabled */
    char *disabled_reason; /* "gone", "failing", "api"; NULL when none */
    int deleted;           /* gone from the set; only attempts still hold it */
    /* dispatcher state, kept across reloads (relay/delivery/dispatch.c owns it) */
    double cwnd;           /* AIMD concurrency window, 1 .. endpoint_concurrency */
    int inflight;          /* attempts in flight from this process */
    int64_t last_decrease_ms;
    struct attempt *q_head, *q_tail; /* claimed ahead, waiting for a window slot */
    int queued;
    int q_listed;          /* on the dispatcher's list of endpoints with a queue */
    struct webhook *q_next;
};

struct webhooks;

/* Create the endpoint set of c and set c->webhooks (loaded when Redis is up). */
struct webhooks *webhooks_new(struct core *c);
/* Closing, in two steps around the owner's teardown of what reads the set: detach marks it
 * closing and clears c->webhooks; close drops the endpoints, fails waiting reloads and frees
 * the set once no store callback holds it. NULL-safe. */
void webhooks_detach(struct webhooks *w);
void webhooks_close(struct webhooks *w);

struct webhooks *webhooks_of(struct core *c);
struct core *webhooks_core(struct webhooks *w);
struct webhook *webhooks_find(struct webhooks *w, const char *id); /* borrowed; NULL */
size_t webhooks_count(const struct webhooks *w);
struct webhook *webhooks_at(struct webhooks *w, size_t i); /* sorted by id; borrowed */
const char *webhooks_version(const struct webhooks *w);

/* Reload the endpoint set from Redis; cb(arg, err) once done (err NULL or a store error).
 * Reloads requested while one runs are coalesced into one more. cb may be NULL. */
typedef void webhooks_done_cb(void *arg, const char *err);
void webhooks_reload(struct webhooks *w, webhooks_done_cb *cb, void *arg);

void webhook_ref(struct webhook *wh);
void webhook_unref(struct webhook *wh); /* frees at zero; NULL-safe */

/* 1 when ev passes wh's filters (AND across keys, OR within a list) and was created after
 * the endpoint was registered. Enabled state is not looked at. */
int webhook_matches(const struct webhook *wh, const struct status_event *ev);
/* The filters alone (replays also reach endpoints registered after the event). */
int webhook_matches_filters(const struct webhook *wh, const struct status_event *ev);


/* ---- validation (REST input) ------------------------------------------------------------
 * Each returns 0, or -1 with a static code ("invalid_request", "forbidden_target") and a
 * message in err (errn bytes). */
int webhook_filters_canon(json_t *filters, char **out_json, const char **code, char *err,
                          size_t errn);
int webhook_headers_canon(json_t *headers, char **out_json, const char **code, char *err,
                          size_t errn);
/* Syntax and literal-address checks of a URL; *needs_dns = 1 when host is a name that must
 * still be resolved and checked (only when private targets are refused). */
int webhook_url_check(const char *url, int allow_private, int *needs_dns, char *host,
                      size_t hostn, const char **code, char *err, size_t errn);

/* Resolve host and refuse it when any address is forbidden: cb(arg, code, message) with
 * code NULL when allowed. Async (evdns); cb runs exactly once, maybe before this returns
 * when nothing needs resolving. */
typedef void webhooks_dns_cb(void *arg, const char *code, const char *msg);
void webhooks_check_host(struct webhooks *w, const char *host, webhooks_dns_cb *cb, void *arg);

/* Fresh random secrets. hmac: "whsec_" + base64(32 random bytes). ed25519: a random seed
 * in the same form; pub receives its "whpk_" public key. out holds PROTO_WHSEC_MAX. */
void webhook_secret_new(char *out, size_t outn);
int webhook_seed_new(char *out, size_t outn, char *pub, size_t pubn);
/* Public key of an ed25519 secret ("whsec_" + base64(seed)). Returns 0 or -1. */
int webhook_public_key(const char *secret, char *pub, size_t pubn);
/* New endpoint id "wh_" + 24 hex. */
void webhook_id_new(char *out, size_t outn);

/* ---- Redis CRUD (async; scripts in store/wh_*.lua) ------------------------------------- */

/* Create (create = 1) or update an endpoint with field/value pairs (nfields pairs; a value
 * of NULL deletes the field). cb(arg, err, found): found = 0 when updating an unknown id or
 * creating an existing one. The local set is reloaded before cb runs. */
typedef void webhooks_put_cb(void *arg, const char *err, int found);
int webhooks_put(struct webhooks *w, const char *id, int create, const char *const *fields,
                 int nfields, webhooks_put_cb *cb, void *arg);
/* Delete an endpoint with its queue and delivery log. cb(arg, err, found). */
int webhooks_delete(struct webhooks *w, const char *id, webhooks_put_cb *cb, void *arg);

/* Script handles for the API's reads and replays. */
enum wh_script {
    WH_SC_LIST = 0,
    WH_SC_REQUEUE,
    WH_SC_FANOUT,
    WH_SC_EVENTS_BY_REQUEST, /* store/events_by_request.lua (the API's, read only) */
    WH_SC_COUNT
};
const struct store_script *webhooks_script(struct webhooks *w, enum wh_script which);

/* Build the endpoint JSON object of the API (without the secret). New reference. */
json_t *webhook_to_json(const struct webhook *wh);

#endif
