/* endpoint.h - one webhook endpoint (struct webhook): its values as stored, filters and
 * matching, secrets and signing keys, validation of REST input, and its API JSON. The set of
 * endpoints (load from Redis, find, put/delete, reload) is relay/delivery/endpoints.h; the
 * dispatcher keeps its per-endpoint scheduler state private (dispatch_x below).
 *
 * An endpoint is refcounted: the set holds one reference, every delivery attempt in flight
 * or queued another, so a reload or delete never frees an endpoint under an attempt. A reload
 * replaces the values of a surviving endpoint in place (webhook_values_clear + _set), so
 * whatever else hangs on the struct (the dispatcher's AIMD state) stays; when its stored hash
 * did not change (webhook_values_same) the values are kept as they are, not parsed again.
 * runs on: core thread. */
#ifndef RELAY_DELIVERY_ENDPOINT_H
#define RELAY_DELIVERY_ENDPOINT_H

#include "protocol/event.h"
#include "protocol/facts.h"
#include "protocol/filter.h"
#include "protocol/sign.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct dispatch_ep; /* relay/delivery/dispatch.c: opaque everywhere else */

#define WH_ID_MAX 40             /* "wh_" + 24 hex + NUL, with room */
#define WH_DESC_MAX 1024         /* description length */
#define WH_MAX_HEADERS 32        /* custom headers per endpoint */
#define WH_HEADER_VALUE_MAX 4096 /* bytes per custom header value */
#define WH_MAX_FILTER_VALUES 1000 /* values per filter list */
#define WH_RATE_LIMIT_MAX 10000   /* rateLimit: deliveries per second at most */

enum wh_scheme { WH_SCHEME_STANDARD = 0, WH_SCHEME_UPSTREAM, WH_SCHEME_BOTH };

struct webhook {
    int refs;
    char id[WH_ID_MAX];
    char *url;             /* as registered (API output) */
    char *target;          /* canonical form handed to the HTTP client */
    char *description;     /* "" when none */
    char *filters_json;    /* canonical JSON object text as stored */
    char *headers_json;    /* canonical JSON object text as stored */
    char **header_lines;   /* "Name: value", NULL-terminated */
    struct proto_filter f; /* parsed filters_json (protocol/filter.h) */
    int enabled;
    int latest;            /* delivery mode "latest": superseded states are skipped */
    long rate_limit;       /* "rateLimit": deliveries per second across all processes; 0 none */
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
    int deleted;           /* gone from the set; only attempts still hold it (endpoints.c) */
    /* The stored hash these values were built from ("field\0value\0" per pair, in load
     * order), so a reload can tell an unchanged endpoint (webhook_values_same) and keep its
     * parsed values. Owned; holds the secrets: wiped when cleared. NULL without values. */
    char *stored;
    size_t stored_len;
    /* The dispatcher's state of this endpoint (AIMD window, local queue), created and used by
     * relay/delivery/dispatch.c only; NULL until it first looks at the endpoint. It lives as
     * long as the endpoint, so it survives reloads. When the last reference goes it holds no
     * references of its own (queued attempts and the dispatcher's queue list each hold one
     * on the endpoint), so webhook_unref releases it with free(). */
    struct dispatch_ep *dispatch_x;
};

/* A new endpoint with id, no values (webhook_values_set fills them) and one reference. */
struct webhook *webhook_new(const char *id);
void webhook_ref(struct webhook *wh);
/* Drop a reference; at zero clear the values (secrets wiped), release dispatch_x and free.
 * NULL-safe. */
void webhook_unref(struct webhook *wh);

/* Fill wh's values (all but id, refs, deleted and dispatch_x) from its stored hash:
 * nkv pairs kv[2i] = field name, kv[2i+1] = value (borrowed; pairs with a NULL are skipped;
 * unknown fields ignored). Call on an endpoint without values (new, or after
 * webhook_values_clear). Unreadable stored filters are logged and match everything; an
 * unreadable secret is logged and leaves the endpoint without that key. */
void webhook_values_set(struct webhook *wh, const char *const *kv, size_t nkv);
/* Free the values webhook_values_set filled (secrets wiped). */
void webhook_values_clear(struct webhook *wh);
/* 1 when kv (as for webhook_values_set) is byte-identical, pair by pair in the same order,
 * to what wh's values were set from: values_set is a function of kv alone, so a reload may
 * then keep wh's values as they are instead of clearing and parsing them again. */
int webhook_values_same(const struct webhook *wh, const char *const *kv, size_t nkv);

/* What an event offers the filters (struct proto_filter_subject): the one place that says
 * where each field comes from. One subject serves every endpoint an event is matched against:
 * the fields that need parsing - the tracking metadata and the facts' wallets (user, sender,
 * recipient) - are read the first time a filter asks for them, once per event. The subject
 * points into ev and into x, so both must outlive it. Flags: the statusrelay.flags names of
 * ev plus "reorg" when ev carries reorg details; failReason as the body shows it
 * (proto_fail_reason_out); wallets: the deposit's depositor and the facts' wallets. Start
 * with subject_from_event, release with subject_cleanup. */
#define SUBJECT_MAX_FLAGS 16
#define SUBJECT_MAX_WALLETS 4
struct event_subject {
    struct proto_filter_subject s;
    const struct status_event *ev;
    const char *flags[SUBJECT_MAX_FLAGS];
    const char *wallets[SUBJECT_MAX_WALLETS];
    char facts_wallets[3][PROTO_FACTS_MAX_ADDR + 1]; /* user, sender, recipient of ev->facts */
    json_t *metadata;    /* owned; NULL when not parsed or none */
    int wallets_read;    /* the facts' wallets were looked for */
    int metadata_read;   /* ev->metadata was parsed (or there is none) */
};
void subject_from_event(const struct status_event *ev, struct event_subject *x);
void subject_cleanup(struct event_subject *x);
/* 1 when x's event passes wh's filters (proto_filter_match: AND across keys, OR within a
 * list; reads what they need into x first). Replays use it alone: they also reach endpoints
 * registered after the event. */
int webhook_matches_subject(const struct webhook *wh, struct event_subject *x);
/* The same, and the event was created after the endpoint was registered. Enabled state is
 * not looked at. */
int webhook_matches(const struct webhook *wh, struct event_subject *x);

/* ---- validation (REST input) ------------------------------------------------------------
 * Each returns 0, or -1 with a static code ("invalid_request", "forbidden_target") and a
 * message in err (errn bytes). Canonical JSON text in *out_json is malloc'd (caller frees).
 * Filters: lists only (null = absent, [] matches nothing), keys status, requestIds,
 * originChainIds, destinationChainIds, users, referrers, failReasons, refundFailReasons,
 * flags, and the object metadata; canonical text has sorted keys (protocol/filter.h). */
int webhook_filters_canon(json_t *filters, char **out_json, const char **code, char *err,
                          size_t errn);
int webhook_headers_canon(json_t *headers, char **out_json, const char **code, char *err,
                          size_t errn);
/* rateLimit: null (none: *out "" deletes the stored field) or an integer 1 ..
 * WH_RATE_LIMIT_MAX (*out its decimal text). out holds 24 bytes. */
int webhook_rate_limit_check(json_t *v, char *out, size_t outn, const char **code, char *err,
                             size_t errn);
/* Syntax and literal-address checks of a URL; *needs_dns = 1 when host is a name that must
 * still be resolved and checked (only when private targets are refused): see
 * webhooks_check_host in endpoints.h (it needs the set's resolver). */
int webhook_url_check(const char *url, int allow_private, int *needs_dns, char *host,
                      size_t hostn, const char **code, char *err, size_t errn);

/* Fresh random secrets. hmac: "whsec_" + base64(32 random bytes). ed25519: a random seed
 * in the same form; pub receives its "whpk_" public key. out holds PROTO_WHSEC_MAX.
 * webhook_seed_new returns 0 or -1. */
void webhook_secret_new(char *out, size_t outn);
int webhook_seed_new(char *out, size_t outn, char *pub, size_t pubn);
/* New endpoint id "wh_" + 24 hex. */
void webhook_id_new(char *out, size_t outn);

/* Build the endpoint JSON object of the API (without the secret). New reference. */
json_t *webhook_to_json(const struct webhook *wh);

#endif
