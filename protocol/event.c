/* event.c - the canonical record: lifetime, enum names, event ids and the JSON encoders.
 *
 * The encoders are hand-written (no jansson tree per event) on json.h's writer: each writes
 * compact JSON into one growing buffer, keys in the fixed order documented in event.h, so the
 * same event always encodes to the same bytes. Strings go through the one escaper of
 * protocol/ (pjson_put_str: RFC 8259, invalid UTF-8 becomes \ufffd, so the output is always
 * valid JSON even for hand-built events; normalised events only hold valid UTF-8).
 * The decoder of the storage record lives in record.c.
 * runs on: any thread (pure). */
#include "protocol/event.h"

#include "protocol/json.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

/* ---- lifetime ---------------------------------------------------------------------------- */

/* malloc'd copy of s; NULL on allocation failure. */
static char *sdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* *dst = copy of src (NULL stays NULL). Returns 0 or -1. */
static int sdup_opt(char **dst, const char *src)
{
    *dst = src != NULL ? sdup(src) : NULL;
    return src != NULL && *dst == NULL ? -1 : 0;
}

static void strv_free(struct proto_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        free(sv->v[i]);
    free(sv->v);
    sv->v = NULL;
    sv->n = 0;
}

static int strv_copy(struct proto_strv *dst, const struct proto_strv *src)
{
    dst->v = NULL;
    dst->n = 0;
    if (src->n == 0)
        return 0;
    if ((dst->v = calloc(src->n, sizeof(*dst->v))) == NULL)
        return -1;
    for (; dst->n < src->n; dst->n++)
        if ((dst->v[dst->n] = sdup(src->v[dst->n])) == NULL)
            return -1;
    return 0;
}

static void deposit_free(struct proto_deposit *d)
{
    if (d == NULL)
        return;
    free(d->address);
    free(d->type);
    free(d->depositor);
    free(d->deposit_tx_hash);
    free(d);
}

void status_event_init(struct status_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->st = PROTO_ST_OTHER;
    ev->source = PROTO_SRC_WS;
}

void status_event_cleanup(struct status_event *ev)
{
    if (ev == NULL)
        return;
    free(ev->request_id);
    free(ev->status);
    strv_free(&ev->in_tx_hashes);
    strv_free(&ev->tx_hashes);
    free(ev->fail_reason);
    free(ev->refund_fail_reason);
    free(ev->details);
    free(ev->referrer);
    free(ev->reorg);
    free(ev->metadata);
    free(ev->type_reason);
    free(ev->type_url);
    free(ev->facts);
    deposit_free(ev->deposit);
    free(ev->prev_status);
    status_event_init(ev);
}

int status_event_copy(struct status_event *dst, const struct status_event *src)
{
    status_event_init(dst);
    /* scalars first, then every owned pointer is replaced by a copy (or NULL) */
    dst->st = src->st;
    dst->updated_at = src->updated_at;
    dst->origin_chain_id = src->origin_chain_id;
    dst->destination_chain_id = src->destination_chain_id;
    dst->quote_created_at = src->quote_created_at;
    dst->flags = src->flags;
    dst->source = src->source;
    dst->observed_at = src->observed_at;
    dst->published_at = src->published_at;
    memcpy(dst->event_id, src->event_id, sizeof(dst->event_id));
    dst->event_id[sizeof(dst->event_id) - 1] = '\0';
    dst->seq = src->seq;
    dst->created_at = src->created_at;
    dst->gen = src->gen;
    dst->type = src->type;
    dst->type_at = src->type_at;
    if (sdup_opt(&dst->type_reason, src->type_reason) != 0 ||
        sdup_opt(&dst->type_url, src->type_url) != 0 ||
        sdup_opt(&dst->request_id, src->request_id) != 0 ||
        sdup_opt(&dst->status, src->status) != 0 ||
        strv_copy(&dst->in_tx_hashes, &src->in_tx_hashes) != 0 ||
        strv_copy(&dst->tx_hashes, &src->tx_hashes) != 0 ||
        sdup_opt(&dst->fail_reason, src->fail_reason) != 0 ||
        sdup_opt(&dst->refund_fail_reason, src->refund_fail_reason) != 0 ||
        sdup_opt(&dst->details, src->details) != 0 ||
        sdup_opt(&dst->referrer, src->referrer) != 0 ||
        sdup_opt(&dst->reorg, src->reorg) != 0 ||
        sdup_opt(&dst->metadata, src->metadata) != 0 || sdup_opt(&dst->facts, src->facts) != 0 ||
        sdup_opt(&dst->prev_status, src->prev_status) != 0)
        goto fail;
    if (src->deposit != NULL) {
        if ((dst->deposit = calloc(1, sizeof(*dst->deposit))) == NULL ||
            sdup_opt(&dst->deposit->address, src->deposit->address) != 0 ||
            sdup_opt(&dst->deposit->type, src->deposit->type) != 0 ||
            sdup_opt(&dst->deposit->depositor, src->deposit->depositor) != 0 ||
            sdup_opt(&dst->deposit->deposit_tx_hash, src->deposit->deposit_tx_hash) != 0)
            goto fail;
    }
    return 0;
fail:
    status_event_cleanup(dst);
    return PROTO_ENOMEM;
}

static int str_eq(const char *a, const char *b)
{
    return a == NULL || b == NULL ? a == b : strcmp(a, b) == 0;
}

static int strv_eq(const struct proto_strv *a, const struct proto_strv *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (!str_eq(a->v[i], b->v[i]))
            return 0;
    return 1;
}

int status_event_equal(const struct status_event *a, const struct status_event *b)
{
    if ((a->deposit == NULL) != (b->deposit == NULL))
        return 0;
    if (a->deposit != NULL &&
        (!str_eq(a->deposit->address, b->deposit->address) ||
         !str_eq(a->deposit->type, b->deposit->type) ||
         !str_eq(a->deposit->depositor, b->deposit->depositor) ||
         !str_eq(a->deposit->deposit_tx_hash, b->deposit->deposit_tx_hash)))
        return 0;
    return str_eq(a->request_id, b->request_id) && str_eq(a->status, b->status) &&
           a->st == b->st && a->updated_at == b->updated_at &&
           a->origin_chain_id == b->origin_chain_id &&
           a->destination_chain_id == b->destination_chain_id &&
           strv_eq(&a->in_tx_hashes, &b->in_tx_hashes) && strv_eq(&a->tx_hashes, &b->tx_hashes) &&
           str_eq(a->fail_reason, b->fail_reason) &&
           str_eq(a->refund_fail_reason, b->refund_fail_reason) &&
           str_eq(a->details, b->details) && str_eq(a->referrer, b->referrer) &&
           str_eq(a->reorg, b->reorg) && str_eq(a->metadata, b->metadata) &&
           str_eq(a->facts, b->facts) &&
           a->quote_created_at == b->quote_created_at && a->flags == b->flags &&
           a->source == b->source && a->observed_at == b->observed_at &&
           a->published_at == b->published_at &&
           strncmp(a->event_id, b->event_id, sizeof(a->event_id)) == 0 && a->seq == b->seq &&
           str_eq(a->prev_status, b->prev_status) && a->created_at == b->created_at &&
           a->gen == b->gen && a->type == b->type && a->type_at == b->type_at &&
           str_eq(a->type_reason, b->type_reason) && str_eq(a->type_url, b->type_url);
}

/* ---- names ------------------------------------------------------------------------------- */

static const char *const type_names[PROTO_EV_COUNT] = {
    [PROTO_EV_STATUS] = PROTO_EVENT_STATUS_UPDATED,
    [PROTO_EV_WATCH_ENDED] = "request.watch.ended",
    [PROTO_EV_STUCK] = "request.stuck",
    [PROTO_EV_ENDPOINT_DISABLED] = "endpoint.disabled",
};

const char *proto_event_type_name(enum proto_event_type t)
{
    return (size_t)t < PROTO_EV_COUNT ? type_names[t] : type_names[PROTO_EV_STATUS];
}

int proto_event_type_parse(const char *s)
{
    for (int i = 0; s != NULL && i < PROTO_EV_COUNT; i++)
        if (strcmp(s, type_names[i]) == 0)
            return i;
    return -1;
}

static const char *const status_names[] = {
    [PROTO_ST_OTHER] = "other",         [PROTO_ST_WAITING] = "waiting",
    [PROTO_ST_DEPOSITING] = "depositing", [PROTO_ST_PENDING] = "pending",
    [PROTO_ST_SUBMITTED] = "submitted", [PROTO_ST_SUCCESS] = "success",
    [PROTO_ST_FAILURE] = "failure",     [PROTO_ST_REFUND] = "refund",
    [PROTO_ST_DELAYED] = "delayed",     [PROTO_ST_FALLBACK] = "fallback",
    [PROTO_ST_RECEIVED] = "received",
};
#define N_STATUS (sizeof(status_names) / sizeof(status_names[0]))

enum proto_status proto_status_parse(const char *s)
{
    if (s == NULL)
        return PROTO_ST_OTHER;
    for (size_t i = 1; i < N_STATUS; i++) /* "other" is not an upstream value */
        if (strcmp(s, status_names[i]) == 0)
            return (enum proto_status)i;
    return PROTO_ST_OTHER;
}

const char *proto_status_name(enum proto_status st)
{
    return (size_t)st < N_STATUS ? status_names[st] : "other";
}

/* "settled" (event.h): the name stays for the callers that stop polling on it */
int proto_status_terminal(enum proto_status st)
{
    return st == PROTO_ST_SUCCESS || st == PROTO_ST_REFUND;
}

int proto_status_settled(enum proto_status st)
{
    return proto_status_terminal(st) || st == PROTO_ST_FALLBACK;
}

static const char *const source_names[PROTO_SRC_COUNT] = {
    [PROTO_SRC_WS] = "ws",
    [PROTO_SRC_POLL] = "poll",
    [PROTO_SRC_REQUESTS] = "requests",
    [PROTO_SRC_WEBHOOK] = "webhook",
};

const char *proto_source_name(enum proto_source src)
{
    return (size_t)src < PROTO_SRC_COUNT ? source_names[src] : "unknown";
}

int proto_source_parse(const char *s)
{
    for (int i = 0; s != NULL && i < PROTO_SRC_COUNT; i++)
        if (strcmp(s, source_names[i]) == 0)
            return i;
    return -1;
}

/* Documented upstream values (docs "Handling Execution Errors", changelog, fixtures; the
 * nine added in 2026 from DEPOSIT_CONFIRMATION_TIMEOUT to TRANSACTION_SUBMISSION_FAILED), in
 * strcmp order for bsearch (a unit test checks the order). */
static const char *const fail_reasons[] = {
    "ACCOUNT_ABSTRACTION_GAS_LIMIT", "ACCOUNT_ABSTRACTION_INVALID_NONCE",
    "ACCOUNT_ABSTRACTION_SIGNATURE_ERROR", "AMOUNT_TOO_LOW_TO_REFUND", "BLOCKED_WALLET",
    "CONTRACT_PAUSED", "DEPOSITED_AMOUNT_TOO_LOW_TO_FILL", "DEPOSIT_ADDRESS_MISMATCH",
    "DEPOSIT_CHAIN_MISMATCH", "DEPOSIT_CONFIRMATION_TIMEOUT", "DEPOSIT_REORGED",
    "DESTINATION_TOKEN_TRANSFER_REJECTED", "DOUBLE_SPEND", "ERC_1155_TOO_MANY_REQUESTED",
    "EXECUTION_REVERTED", "FLUID_DEX_ERROR", "GASLESS_PERMIT_BALANCE_TOO_LOW",
    "GENERATE_SWAP_FAILED", "INCORRECT_DEPOSIT_CURRENCY", "INCORRECT_PAYMENT",
    "INSUFFICIENT_FUNDS_FOR_RENT", "INSUFFICIENT_NATIVE_TOKENS_SUPPLIED",
    "INSUFFICIENT_POOL_LIQUIDITY", "INVALID_GAS_PRICE", "INVALID_NONCE", "INVALID_SENDER",
    "INVALID_SIGNATURE", "INVALID_SIGNER", "JUPITER_INVALID_TOKEN_ACCOUNT", "MANUAL_ADMIN_REFUND",
    "MANUAL_REFUND_REQUIRED", "MINT_NOT_ACTIVE", "MINT_QUANTITY_EXCEEDS_MAX_PER_WALLET",
    "MINT_QUANTITY_EXCEEDS_MAX_SUPPLY", "MISSING_REVERT_DATA", "N/A",
    "NEGATIVE_NEW_AMOUNT_AFTER_FEES", "NEW_CALLDATA_INCLUDES_HIGHER_RENT_FEE",
    "NO_INTERNAL_SWAP_ROUTES_FOUND", "NO_QUOTES", "ORDER_ALREADY_FILLED", "ORDER_EXPIRED",
    "ORDER_IS_CANCELLED", "ORIGIN_CURRENCY_MISMATCH", "ORPHANED_DEPOSIT_REFUND",
    "PROTOCOL_DEADLINE_EXPIRED", "QUOTED_GAS_LIMIT_EXCEEDED", "REVERSE_SWAP_FAILED",
    "SEAPORT_INEXACT_FRACTION", "SEAPORT_INVALID_FULFILLER", "SIGNATURE_EXPIRED", "SLIPPAGE",
    "SOLVER_BALANCE_TOO_LOW", "SOLVER_CAPACITY_EXCEEDED", "SPONSOR_BALANCE_TOO_LOW",
    "SWAP_IMPACT_TOO_HIGH", "SWAP_USES_TOO_MUCH_GAS", "TOKEN_NOT_TRANSFERABLE",
    "TOO_LITTLE_RECEIVED", "TRANSACTION_NOT_INCLUDED", "TRANSACTION_REVERTED",
    "TRANSACTION_SUBMISSION_FAILED", "TRANSACTION_TOO_LARGE", "TRANSFER_AMOUNT_EXCEEDS_ALLOWANCE",
    "TRANSFER_AMOUNT_EXCEEDS_BALANCE", "TRANSFER_FAILED", "TRANSFER_FROM_FAILED", "TTL_EXPIRED",
    "UNKNOWN", "ZERO_SELL_AMOUNT",
};
static const char *const refund_reasons[] = {
    "AMOUNT_TOO_LOW_TO_REFUND", "MANUAL_REFUND_REQUIRED", "N/A", "NEGATIVE_NEW_AMOUNT_AFTER_FEES",
    "REFUND_RECIPIENT_IS_VASP", "REVERSE_SWAP_FAILED", "SWAP_CURRENCY_NOT_ON_ORIGIN", "UNKNOWN",
};

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

int proto_fail_reason_known(const char *s)
{
    return s != NULL && bsearch(s, fail_reasons, sizeof(fail_reasons) / sizeof(fail_reasons[0]),
                                sizeof(fail_reasons[0]), cmp_name) != NULL;
}

int proto_refund_reason_known(const char *s)
{
    return s != NULL &&
           bsearch(s, refund_reasons, sizeof(refund_reasons) / sizeof(refund_reasons[0]),
                   sizeof(refund_reasons[0]), cmp_name) != NULL;
}

/* A reason that says something: not NULL and not "N/A". */
static int reason_says(const char *r)
{
    return r != NULL && strcmp(r, "N/A") != 0;
}

const char *proto_fail_reason_out(const struct status_event *ev)
{
    switch (proto_status_parse(ev->status)) {
    case PROTO_ST_FAILURE:
    case PROTO_ST_FALLBACK:
    case PROTO_ST_REFUND: return reason_says(ev->fail_reason) ? ev->fail_reason : "UNKNOWN";
    case PROTO_ST_OTHER: return reason_says(ev->fail_reason) ? ev->fail_reason : "N/A";
    default: return "N/A";
    }
}

const char *proto_flag_name(unsigned flag)
{
    switch (flag) {
    case PROTO_F_UNKNOWN_STATUS: return "unknownStatus";
    case PROTO_F_UNKNOWN_FAIL_REASON: return "unknownFailReason";
    case PROTO_F_UNKNOWN_REFUND_REASON: return "unknownRefundFailReason";
    case PROTO_F_DETAILS_TRUNCATED: return "detailsTruncated";
    case PROTO_F_REVERSAL: return "reversal";
    case PROTO_F_UNCONFIRMED_DEPOSIT: return "unconfirmedDeposit";
    case PROTO_F_FACTS: return "facts";
    default: return NULL;
    }
}

/* ---- event id ---------------------------------------------------------------------------- */

void proto_event_id(const char *request_id, uint64_t seq, int64_t gen, char *out)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    char num[44];
    num[0] = ':';
    size_t numlen = 1 + pjson_fmt_u64(num + 1, seq);
    if (gen > 0) {
        num[numlen++] = '@';
        numlen += pjson_fmt_u64(num + numlen, (uint64_t)gen);
    }
    const char *id = request_id != NULL ? request_id : "";
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, id, strlen(id)) == 1 &&
             EVP_DigestUpdate(ctx, num, numlen) == 1 && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 &&
             mdlen >= 16;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        out[0] = '\0';
        return;
    }
    memcpy(out, "evt_", 4);
    for (int i = 0; i < 16; i++) {
        out[4 + 2 * i] = hex[md[i] >> 4];
        out[5 + 2 * i] = hex[md[i] & 15];
    }
    out[36] = '\0';
}

/* ---- JSON helpers (on json.h's writer) --------------------------------------------------- */

/* failReason / refundFailReason in upstream shapes: never null. */
static void put_reason(struct pjson_buf *b, const char *s)
{
    pjson_put_str(b, s != NULL ? s : "N/A");
}

/* details: JSON text verbatim when it is one (PROTO_HAS_DETAILS_JSON), else a string/null. */
static void put_details(struct pjson_buf *b, const struct status_event *ev)
{
    if (ev->details != NULL && (ev->flags & PROTO_HAS_DETAILS_JSON))
        pjson_put_raw(b, ev->details, strlen(ev->details));
    else
        pjson_put_str(b, ev->details);
}

/* A chain id in upstream shapes: 0 (unknown) is null. */
static void put_chain(struct pjson_buf *b, int64_t id)
{
    if (id == 0)
        PJSON_PUT_LIT(b, "null");
    else
        pjson_put_i64(b, id);
}

static void put_strv(struct pjson_buf *b, const struct proto_strv *sv)
{
    PJSON_PUT_LIT(b, "[");
    for (size_t i = 0; i < sv->n; i++) {
        if (i > 0)
            PJSON_PUT_LIT(b, ",");
        pjson_put_str(b, sv->v[i]);
    }
    PJSON_PUT_LIT(b, "]");
}

static void put_deposit(struct pjson_buf *b, const struct proto_deposit *d)
{
    if (d == NULL) {
        PJSON_PUT_LIT(b, "null");
        return;
    }
    PJSON_PUT_LIT(b, "{\"address\":");
    pjson_put_str(b, d->address);
    PJSON_PUT_LIT(b, ",\"depositAddressType\":");
    pjson_put_str(b, d->type);
    PJSON_PUT_LIT(b, ",\"depositor\":");
    pjson_put_str(b, d->depositor);
    PJSON_PUT_LIT(b, ",\"depositTxHash\":");
    pjson_put_str(b, d->deposit_tx_hash);
    PJSON_PUT_LIT(b, "}");
}

/* ---- encoders ---------------------------------------------------------------------------- */

/* What a request event type adds at the end of "data" (nothing for a status event). */
static void put_type_data(struct pjson_buf *b, const struct status_event *ev)
{
    if (ev->type == PROTO_EV_WATCH_ENDED) {
        PJSON_PUT_LIT(b, ",\"reason\":");
        pjson_put_str(b, ev->type_reason);
    } else if (ev->type == PROTO_EV_STUCK) {
        PJSON_PUT_LIT(b, ",\"stuckSince\":");
        pjson_put_i64(b, ev->type_at);
    }
}

/* endpoint.disabled's "data" and "statusrelay" (it has no request: request_id is the
 * webhook id). */
static void put_disabled(struct pjson_buf *b, const struct status_event *ev);

/* The upstream webhook/websocket "data" object (key order of the upstream webhook). */
static void put_data(struct pjson_buf *b, const struct status_event *ev)
{
    PJSON_PUT_LIT(b, "{\"status\":");
    pjson_put_str(b, ev->status);
    PJSON_PUT_LIT(b, ",\"inTxHashes\":");
    put_strv(b, &ev->in_tx_hashes);
    PJSON_PUT_LIT(b, ",\"txHashes\":");
    put_strv(b, &ev->tx_hashes);
    PJSON_PUT_LIT(b, ",\"updatedAt\":");
    pjson_put_i64(b, ev->updated_at);
    PJSON_PUT_LIT(b, ",\"originChainId\":");
    put_chain(b, ev->origin_chain_id);
    PJSON_PUT_LIT(b, ",\"destinationChainId\":");
    put_chain(b, ev->destination_chain_id);
    PJSON_PUT_LIT(b, ",\"depositAddress\":");
    put_deposit(b, ev->deposit);
    PJSON_PUT_LIT(b, ",\"requestId\":");
    pjson_put_str(b, ev->request_id);
    PJSON_PUT_LIT(b, ",\"referrer\":");
    pjson_put_str(b, ev->referrer);
    PJSON_PUT_LIT(b, ",\"details\":");
    put_details(b, ev);
    PJSON_PUT_LIT(b, ",\"failReason\":");
    pjson_put_str(b, proto_fail_reason_out(ev));
    PJSON_PUT_LIT(b, ",\"refundFailReason\":");
    put_reason(b, ev->refund_fail_reason);
    put_type_data(b, ev);
    PJSON_PUT_LIT(b, "}");
}

/* The event id as a JSON string (the fixed array need not be NUL-terminated). */
static void put_event_id(struct pjson_buf *b, const struct status_event *ev)
{
    char id[PROTO_EVENT_ID_MAX];
    memcpy(id, ev->event_id, sizeof(id));
    id[sizeof(id) - 1] = '\0';
    pjson_put_str(b, id);
}

/* The relay's own object; snapshot adds "snapshot":true (dashboard frames only). */
static void put_relay(struct pjson_buf *b, const struct status_event *ev, int snapshot)
{
    PJSON_PUT_LIT(b, "{\"eventId\":");
    put_event_id(b, ev);
    PJSON_PUT_LIT(b, ",\"seq\":");
    pjson_put_u64(b, ev->seq);
    PJSON_PUT_LIT(b, ",\"previousStatus\":");
    pjson_put_str(b, ev->prev_status);
    PJSON_PUT_LIT(b, ",\"source\":");
    pjson_put_str(b, proto_source_name(ev->source));
    PJSON_PUT_LIT(b, ",\"observedAt\":");
    pjson_put_i64(b, ev->observed_at);
    if (ev->published_at != 0) {
        PJSON_PUT_LIT(b, ",\"publishedAt\":");
        pjson_put_i64(b, ev->published_at);
    }
    int first = 1;
    for (unsigned bit = 1; bit & PROTO_F_MASK; bit <<= 1) {
        const char *name = proto_flag_name(bit);
        if (!(ev->flags & bit) || name == NULL)
            continue;
        if (first)
            PJSON_PUT_LIT(b, ",\"flags\":[");
        else
            PJSON_PUT_LIT(b, ",");
        pjson_put_str(b, name);
        first = 0;
    }
    if (!first)
        PJSON_PUT_LIT(b, "]");
    if (ev->reorg != NULL) {
        PJSON_PUT_LIT(b, ",\"reorg\":");
        pjson_put_raw(b, ev->reorg, strlen(ev->reorg));
    }
    if (ev->metadata != NULL) {
        PJSON_PUT_LIT(b, ",\"metadata\":");
        pjson_put_raw(b, ev->metadata, strlen(ev->metadata));
    }
    if (ev->facts != NULL) {
        PJSON_PUT_LIT(b, ",\"request\":");
        pjson_put_raw(b, ev->facts, strlen(ev->facts));
    }
    if (snapshot)
        PJSON_PUT_LIT(b, ",\"snapshot\":true");
    PJSON_PUT_LIT(b, "}");
}

static void put_disabled(struct pjson_buf *b, const struct status_event *ev)
{
    PJSON_PUT_LIT(b, ",\"data\":{\"webhookId\":");
    pjson_put_str(b, ev->request_id);
    PJSON_PUT_LIT(b, ",\"url\":");
    pjson_put_str(b, ev->type_url);
    PJSON_PUT_LIT(b, ",\"reason\":");
    pjson_put_str(b, ev->type_reason);
    PJSON_PUT_LIT(b, ",\"at\":");
    pjson_put_i64(b, ev->type_at);
    PJSON_PUT_LIT(b, "},\"statusrelay\":{\"eventId\":");
    put_event_id(b, ev);
    PJSON_PUT_LIT(b, ",\"seq\":");
    pjson_put_u64(b, ev->seq);
    PJSON_PUT_LIT(b, "}");
}

/* {"event":<type name>, */
static void put_event_name(struct pjson_buf *b, const struct status_event *ev)
{
    PJSON_PUT_LIT(b, "{\"event\":");
    pjson_put_str(b, proto_event_type_name(ev->type));
}

char *proto_event_webhook_body(const struct status_event *ev, size_t *len)
{
    struct pjson_buf b = {0};
    put_event_name(&b, ev);
    PJSON_PUT_LIT(&b, ",\"timestamp\":");
    pjson_put_i64(&b, ev->created_at);
    if (ev->type == PROTO_EV_ENDPOINT_DISABLED) {
        put_disabled(&b, ev);
        PJSON_PUT_LIT(&b, "}");
        return pjson_buf_finish(&b, len);
    }
    PJSON_PUT_LIT(&b, ",\"data\":");
    put_data(&b, ev);
    PJSON_PUT_LIT(&b, ",\"statusrelay\":");
    put_relay(&b, ev, 0);
    PJSON_PUT_LIT(&b, "}");
    return pjson_buf_finish(&b, len);
}

char *proto_event_ws_frame(const struct status_event *ev, int snapshot, int64_t published_ms,
                           size_t *len)
{
    struct pjson_buf b = {0};
    struct status_event state;
    if (snapshot && ev->type != PROTO_EV_STATUS && ev->type != PROTO_EV_ENDPOINT_DISABLED) {
        state = *ev; /* borrowed members: the present state, as a status event */
        state.type = PROTO_EV_STATUS;
        ev = &state;
    }
    put_event_name(&b, ev);
    if (ev->type == PROTO_EV_ENDPOINT_DISABLED) {
        PJSON_PUT_LIT(&b, ",\"publishedAt\":");
        pjson_put_i64(&b, published_ms);
        put_disabled(&b, ev);
        PJSON_PUT_LIT(&b, "}");
        return pjson_buf_finish(&b, len);
    }
    PJSON_PUT_LIT(&b, ",\"data\":");
    put_data(&b, ev);
    PJSON_PUT_LIT(&b, ",\"publishedAt\":");
    pjson_put_i64(&b, published_ms);
    PJSON_PUT_LIT(&b, ",\"statusrelay\":");
    put_relay(&b, ev, snapshot);
    PJSON_PUT_LIT(&b, "}");
    return pjson_buf_finish(&b, len);
}

char *proto_event_status_v3(const struct status_event *ev, size_t *len)
{
    struct pjson_buf b = {0};
    PJSON_PUT_LIT(&b, "{\"status\":");
    pjson_put_str(&b, ev->status);
    if (ev->details != NULL) {
        PJSON_PUT_LIT(&b, ",\"details\":");
        put_details(&b, ev);
    }
    PJSON_PUT_LIT(&b, ",\"inTxHashes\":");
    put_strv(&b, &ev->in_tx_hashes);
    PJSON_PUT_LIT(&b, ",\"txHashes\":");
    put_strv(&b, &ev->tx_hashes);
    PJSON_PUT_LIT(&b, ",\"updatedAt\":");
    pjson_put_i64(&b, ev->updated_at);
    PJSON_PUT_LIT(&b, ",\"originChainId\":");
    put_chain(&b, ev->origin_chain_id);
    PJSON_PUT_LIT(&b, ",\"destinationChainId\":");
    put_chain(&b, ev->destination_chain_id);
    if (ev->quote_created_at != 0) {
        PJSON_PUT_LIT(&b, ",\"quoteCreatedAt\":");
        pjson_put_i64(&b, ev->quote_created_at);
    }
    PJSON_PUT_LIT(&b, ",\"failReason\":");
    pjson_put_str(&b, proto_fail_reason_out(ev));
    PJSON_PUT_LIT(&b, ",\"refundFailReason\":");
    put_reason(&b, ev->refund_fail_reason);
    PJSON_PUT_LIT(&b, "}");
    return pjson_buf_finish(&b, len);
}

/* Storage form: every field, nulls kept as null (no "N/A" substitution), chain ids as
 * numbers (0 = unknown). Decoded by proto_event_from_record (record.c). */
/* The "event" object of a record of another type (event.h), without its closing brace. */
static void put_record_type(struct pjson_buf *b, const struct status_event *ev)
{
    PJSON_PUT_LIT(b, "\"event\":{\"type\":");
    pjson_put_str(b, proto_event_type_name(ev->type));
    PJSON_PUT_LIT(b, ",\"seq\":");
    pjson_put_u64(b, ev->seq);
    PJSON_PUT_LIT(b, ",\"createdAt\":");
    pjson_put_i64(b, ev->created_at);
    if (ev->type == PROTO_EV_ENDPOINT_DISABLED) {
        PJSON_PUT_LIT(b, ",\"webhookId\":");
        pjson_put_str(b, ev->request_id);
        PJSON_PUT_LIT(b, ",\"url\":");
        pjson_put_str(b, ev->type_url);
    }
    if (ev->type_reason != NULL) {
        PJSON_PUT_LIT(b, ",\"reason\":");
        pjson_put_str(b, ev->type_reason);
    }
    if (ev->type == PROTO_EV_STUCK) {
        PJSON_PUT_LIT(b, ",\"stuckSince\":");
        pjson_put_i64(b, ev->type_at);
    } else if (ev->type == PROTO_EV_ENDPOINT_DISABLED) {
        PJSON_PUT_LIT(b, ",\"at\":");
        pjson_put_i64(b, ev->type_at);
    }
}

char *proto_event_record(const struct status_event *ev, size_t *len)
{
    struct pjson_buf b = {0};
    if (ev->type == PROTO_EV_ENDPOINT_DISABLED) {
        PJSON_PUT_LIT(&b, "{");
        put_record_type(&b, ev);
        PJSON_PUT_LIT(&b, "}}");
        return pjson_buf_finish(&b, len);
    }
    PJSON_PUT_LIT(&b, "{\"requestId\":");
    pjson_put_str(&b, ev->request_id);
    PJSON_PUT_LIT(&b, ",\"status\":");
    pjson_put_str(&b, ev->status);
    PJSON_PUT_LIT(&b, ",\"updatedAt\":");
    pjson_put_i64(&b, ev->updated_at);
    PJSON_PUT_LIT(&b, ",\"originChainId\":");
    pjson_put_i64(&b, ev->origin_chain_id);
    PJSON_PUT_LIT(&b, ",\"destinationChainId\":");
    pjson_put_i64(&b, ev->destination_chain_id);
    PJSON_PUT_LIT(&b, ",\"inTxHashes\":");
    put_strv(&b, &ev->in_tx_hashes);
    PJSON_PUT_LIT(&b, ",\"txHashes\":");
    put_strv(&b, &ev->tx_hashes);
    PJSON_PUT_LIT(&b, ",\"failReason\":");
    pjson_put_str(&b, ev->fail_reason);
    PJSON_PUT_LIT(&b, ",\"refundFailReason\":");
    pjson_put_str(&b, ev->refund_fail_reason);
    PJSON_PUT_LIT(&b, ",\"details\":");
    put_details(&b, ev);
    PJSON_PUT_LIT(&b, ",\"referrer\":");
    pjson_put_str(&b, ev->referrer);
    PJSON_PUT_LIT(&b, ",\"depositAddress\":");
    put_deposit(&b, ev->deposit);
    PJSON_PUT_LIT(&b, ",\"quoteCreatedAt\":");
    pjson_put_i64(&b, ev->quote_created_at);
    PJSON_PUT_LIT(&b, ",\"flags\":");
    pjson_put_u64(&b, ev->flags);
    PJSON_PUT_LIT(&b, ",\"source\":");
    pjson_put_str(&b, proto_source_name(ev->source));
    PJSON_PUT_LIT(&b, ",\"observedAt\":");
    pjson_put_i64(&b, ev->observed_at);
    PJSON_PUT_LIT(&b, ",\"publishedAt\":");
    pjson_put_i64(&b, ev->published_at);
    PJSON_PUT_LIT(&b, ",\"eventId\":");
    put_event_id(&b, ev);
    PJSON_PUT_LIT(&b, ",\"seq\":");
    pjson_put_u64(&b, ev->seq);
    PJSON_PUT_LIT(&b, ",\"previousStatus\":");
    pjson_put_str(&b, ev->prev_status);
    PJSON_PUT_LIT(&b, ",\"createdAt\":");
    pjson_put_i64(&b, ev->created_at);
    if (ev->gen != 0) { /* none in records of versions before generations */
        PJSON_PUT_LIT(&b, ",\"gen\":");
        pjson_put_i64(&b, ev->gen);
    }
    if (ev->reorg != NULL) {
        PJSON_PUT_LIT(&b, ",\"reorg\":");
        pjson_put_raw(&b, ev->reorg, strlen(ev->reorg));
    }
    if (ev->metadata != NULL) { /* last: store/apply.lua appends it the same way */
        PJSON_PUT_LIT(&b, ",\"metadata\":");
        pjson_put_raw(&b, ev->metadata, strlen(ev->metadata));
    }
    if (ev->type != PROTO_EV_STATUS) { /* never through apply.lua: after the metadata */
        PJSON_PUT_LIT(&b, ",");
        put_record_type(&b, ev);
        PJSON_PUT_LIT(&b, "}");
    }
    PJSON_PUT_LIT(&b, "}");
    return pjson_buf_finish(&b, len);
}
