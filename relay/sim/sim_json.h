/* sim_json.h - the upstream's wire shapes, written by hand in the upstream's field order:
 * websocket frames (ready greeting, acks, events in envelope A and B), the status v3 body,
 * the upstream webhook body, /requests/v3 items, /chains and the {message, errorCode} error
 * body. Hand-written (not jansson) because the hot path of load mode serialises tens of
 * thousands of events a second; every string goes through one escaping routine.
 * runs on: the simulator's lws thread (sbuf is plain memory: any thread that owns it). */
#ifndef RELAY_SIM_JSON_H
#define RELAY_SIM_JSON_H

#include <stddef.h>
#include <stdint.h>

struct sim_req;

/* A growable byte buffer. `pre` bytes of headroom stay unused at the start (LWS_PRE for
 * websocket frames); the text starts at p + pre. Always NUL-terminated. */
struct sbuf {
    char *p;
    size_t len; /* including pre */
    size_t cap;
    size_t pre;
};

void sbuf_init(struct sbuf *b, size_t pre);
void sbuf_free(struct sbuf *b);
/* Hand the heap buffer to the caller (free() it); b is left empty. */
char *sbuf_take(struct sbuf *b);
const char *sbuf_text(const struct sbuf *b);
size_t sbuf_textlen(const struct sbuf *b);
void sbuf_add(struct sbuf *b, const char *s, size_t n);
void sbuf_adds(struct sbuf *b, const char *s);
void sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal with quotes; NULL writes null. Invalid UTF-8 bytes become U+FFFD. */
void sbuf_jstr(struct sbuf *b, const char *s);
void sbuf_jint(struct sbuf *b, int64_t v);

/* {"type":"connection","status":"ready","data":{"id":"<id>"}} */
void sj_ready(struct sbuf *b, const char *socket_id);
/* {"type":"subscribe","status":"success","data":{"event":"request.status.updated",
 *  "filters":{"id":"<id>"}}} */
void sj_subscribe_ack(struct sbuf *b, const char *id);
/* {"type":"unsubscribe","status":"success","data":{"event":"request.status.updated"}} */
void sj_unsubscribe_ack(struct sbuf *b);
/* A refusal of a message we cannot act on (guessed shape: the upstream documents none). */
void sj_ws_error(struct sbuf *b, const char *type, const char *message);
/* The event frame: envelope A {"event","data","publishedAt"} or B {"data":{"event","data"}}.
 * minimal leaves out depositAddress, details, failReason and refundFailReason. */
void sj_ws_event(struct sbuf *b, const struct sim_req *r, int envelope_b, int minimal,
                 int64_t published_at_ms);
/* GET /intents/status/v3 body. */
void sj_status_v3(struct sbuf *b, const struct sim_req *r);
/* Upstream webhook body {"event","timestamp","data"} with timestamp in ms. */
void sj_webhook(struct sbuf *b, const struct sim_req *r, int64_t timestamp_ms);
/* One /requests/v3 item; "metadata": {"reorg": {...}} only after a reorg of its deposit. */
void sj_requests_v3_item(struct sbuf *b, const struct sim_req *r);
/* {"message":"...","errorCode":"..."} */
void sj_error(struct sbuf *b, const char *message, const char *error_code);
/* The chains of GET /chains, in table order; flags per chain (SIM_CHAIN_*). */
#define SIM_CHAIN_DISABLED 1u /* "disabled": true (and "depositEnabled": false) */
#define SIM_CHAIN_LAGGING 2u  /* "blockProductionLagging": true */
#define SIM_CHAINS_MAX 16     /* >= sim_chain_count() */
size_t sim_chain_count(void);
/* Table index of a chain id, or -1. */
int sim_chain_index(int64_t chain_id);
/* The flags chain i starts with: Optimism (10) lagging, Polygon (137) disabled. */
unsigned sim_chain_default_flags(size_t i);
/* GET /chains body: {"chains":[{id, name, displayName, vmType, explorerUrl, explorerName,
 * explorerPaths: {transaction: "/tx/{TX_HASH}"}, depositEnabled, disabled,
 * blockProductionLagging, currency, iconUrl, logoUrl, brandColor}]}. flags: one per chain
 * (table order), NULL = the defaults. */
void sj_chains(struct sbuf *b, const unsigned char *flags);
/* Name of a known chain id for addresses and the chains list ("" when unknown). */
const char *sim_chain_vm(int64_t chain_id);

#endif
