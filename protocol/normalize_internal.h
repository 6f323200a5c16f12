/* normalize_internal.h - the field readers shared by the decoders of protocol/: normalize.c
 * (websocket, webhook, status v3; defines them), requests_v3.c (GET /requests/v3) and record.c
 * (our storage record). Private to protocol/: no other folder includes it.
 *
 * Every reader takes a struct nctx (where errors go and the JSON path of the object being
 * read), reads one member of a parsed object (json.h) and returns 0 or a PROTO_E* code after
 * filling the error with the field's full path ("data.failReason"). Strings handed out are
 * malloc'd copies owned by the caller (the event); on failure a reader may have stored
 * partial results in the event, which the entry point cleans with status_event_cleanup.
 * runs on: any thread (pure). */
#ifndef PROTO_NORMALIZE_INTERNAL_H
#define PROTO_NORMALIZE_INTERNAL_H

#include "protocol/json.h"
#include "protocol/normalize.h"

struct nctx {
    struct proto_err *err;
    const char *pfx; /* JSON path of the object being read, "" or "data." ... */
    int record;      /* decoding our own storage record: exact values, no defaults or flags */
};

/* Presence of an optional value: absent, JSON null, or a value. */
enum { NORM_ABSENT = 0, NORM_NULL, NORM_VALUE };

/* Collects hashes in order, dropping duplicates; PROTO_MAX_HASHES at most. Entries are
 * borrowed from the document. */
struct hashlist {
    const struct pjson *h[PROTO_MAX_HASHES];
    size_t n;
};

/* proto_fail with field = c->pfx + key; returns code. */
int norm_fail(const struct nctx *c, int code, const char *key, const char *msg);

/* malloc'd NUL-terminated copy of s[0..n); NULL when out of memory. */
char *norm_mdup(const char *s, size_t n);

/* NORM_ABSENT (v NULL), NORM_NULL (JSON null) or NORM_VALUE. */
int norm_presence(const struct pjson *v);

/* 1 when v is the JSON string s. */
int norm_is_str(const struct pjson *v, const char *s);

/* An integer member in [min, max] into *out; *pres gets its presence. A required member must
 * be a value (absent: PROTO_EMISSING, null: PROTO_ETYPE); a non-integer is PROTO_ETYPE, out
 * of range (or beyond int64) PROTO_ERANGE. An optional absent/null member leaves *out. */
int norm_rd_int(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                int64_t min, int64_t max, int64_t *out, int *pres);

/* A string member: *s borrowed from the document, NULL when absent or null (allowed only when
 * not required); *pres gets its presence. Other types: PROTO_ETYPE. */
int norm_rd_str(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                const struct pjson **s, int *pres);

/* Records list every key, nullable ones too: PROTO_EMISSING when c->record and key is absent. */
int norm_need_key(const struct nctx *c, const struct pjson *obj, const char *key);

/* An enum-like token (status, reasons, deposit type): 1..PROTO_MAX_STATUS printable ASCII
 * chars without space, quote or backslash (PROTO_EVALUE / PROTO_ETOOLONG otherwise). */
int norm_check_token(const struct nctx *c, const char *key, const struct pjson *s);

/* *out = malloc'd copy of string s (PROTO_ENOMEM). */
int norm_copy_str(const struct nctx *c, const char *key, const struct pjson *s, char **out);

/* An optional free-text string (referrer, addresses) of at most PROTO_MAX_STR bytes into a
 * malloc'd *out (left alone when absent or null). */
int norm_rd_text(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                 char **out, int *pres);

/* s[0..n) is a request id (proto_request_id_valid): PROTO_ETOOLONG / PROTO_EVALUE if not. */
int norm_valid_request_id(const struct nctx *c, const char *key, const char *s, size_t n);

/* Add hash string s (validated: proto_hash_valid) to hl unless already there; more than
 * PROTO_MAX_HASHES distinct hashes is PROTO_ETOOLONG. */
int norm_hashlist_add(const struct nctx *c, const char *key, struct hashlist *hl,
                      const struct pjson *s);

/* Copy hl into sv (malloc'd; nothing when hl is empty). On PROTO_ENOMEM sv holds what was
 * copied so far (freed with the event). */
int norm_hashlist_store(const struct nctx *c, const char *key, const struct hashlist *hl,
                        struct proto_strv *sv);

/* failReason / refundFailReason token into a malloc'd *out. Upstream: absent/null/"" ->
 * "N/A". Record (c->record): the key is required and null -> NULL. */
int norm_rd_reason(const struct nctx *c, const struct pjson *obj, const char *key, char **out,
                   int *pres);

/* A depositAddress object (or null) into a calloc'd *out owned by the event from the moment it
 * is set: {address, depositor, depositAddressType or type, depositTxHash}. */
int norm_rd_deposit(const struct nctx *c, const struct pjson *obj, const char *key, int required,
                    struct proto_deposit **out, int *pres);

/* The required "status" token into ev->status and ev->st. */
int norm_rd_status(const struct nctx *c, const struct pjson *obj, struct status_event *ev);

/* Flags derived from values: unknown status / fail reason / refund reason (upstream sources;
 * a record carries its own). */
void norm_value_flags(struct status_event *ev);

/* The shared payload of websocket events, upstream webhooks, status v3 bodies and records
 * (object d) into ev. request_id: the caller's id (status v3) or NULL to read "requestId". */
int norm_payload(const struct nctx *c, const struct pjson *d, const char *request_id,
                 struct status_event *ev);

#endif
