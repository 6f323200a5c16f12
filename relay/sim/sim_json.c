/* sim_json.c - see sim_json.h. runs on: the simulator's lws thread. */
#include "relay/sim/sim_json.h"
#include "relay/sim/sim_facts.h"
#include "relay/sim/sim_model.h"
#include "relay/sim/sim_rand.h"
#include "relay/common/util.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- sbuf ------------------------------------------------------------------------------- */

void sbuf_init(struct sbuf *b, size_t pre)
{
    b->cap = pre + 256;
    b->p = xmalloc(b->cap);
    b->pre = pre;
    b->len = pre;
    b->p[b->len] = '\0';
}

void sbuf_free(struct sbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

char *sbuf_take(struct sbuf *b)
{
    char *p = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

const char *sbuf_text(const struct sbuf *b)
{
    return b->p + b->pre;
}

size_t sbuf_textlen(const struct sbuf *b)
{
    return b->len - b->pre;
}

static void reserve(struct sbuf *b, size_t n)
{
    if (b->len + n + 1 <= b->cap)
        return;
    while (b->len + n + 1 > b->cap)
        b->cap *= 2;
    b->p = xrealloc(b->p, b->cap);
}

void sbuf_add(struct sbuf *b, const char *s, size_t n)
{
    reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void sbuf_adds(struct sbuf *b, const char *s)
{
    sbuf_add(b, s, strlen(s));
}

void sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= b->cap - b->len) {
        reserve(b, (size_t)n);
        va_start(ap, fmt);
        vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

/* Length of a valid UTF-8 sequence at s (1..4), or 0 when invalid. */
static int utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        return (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (s[0] >= 0xe0 && s[0] <= 0xef) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f))
            return 0; /* overlong, surrogate */
        return 3;
    }
    if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
            return 0;
        if ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
            return 0;
        return 4;
    }
    return 0;
}

void sbuf_jstr(struct sbuf *b, const char *s)
{
    if (s == NULL) {
        sbuf_add(b, "null", 4);
        return;
    }
    sbuf_add(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            sbuf_add(b, (const char *)run, (size_t)(p - run));
        if (*p == '\0')
            break;
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            sbuf_add(b, esc, 2);
            p++;
        } else if (*p < 0x20) {
            if (*p == '\n')
                sbuf_add(b, "\\n", 2);
            else if (*p == '\r')
                sbuf_add(b, "\\r", 2);
            else if (*p == '\t')
                sbuf_add(b, "\\t", 2);
            else
                sbuf_addf(b, "\\u%04x", *p);
            p++;
        } else {
            int n = utf8_len(p);
            if (n == 0) {
                sbuf_add(b, "\\ufffd", 6);
                p++;
            } else {
                sbuf_add(b, (const char *)p, (size_t)n);
                p += n;
            }
        }
    }
    sbuf_add(b, "\"", 1);
}

void sbuf_jint(struct sbuf *b, int64_t v)
{
    char tmp[24];
    int n = snprintf(tmp, sizeof(tmp), "%" PRId64, v);
    sbuf_add(b, tmp, (size_t)n);
}

/* ISO-8601 UTC with milliseconds ("2026-08-21T10:15:30.123Z") into out (>= 32 bytes). */
static void sim_iso8601(int64_t ms, char *out, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* ---- chains ----------------------------------------------------------------------------- */

/* Explorer links follow the upstream's shape: explorerUrl + explorerPaths.transaction with
 * {TX_HASH} replaced. Icons are data: URIs (a coloured disc with the initial) so a page or test
 * shows them without any network. */
static const struct chain {
    int64_t id;
    const char *name, *display, *vm, *explorer, *explorer_name, *color;
    const char *symbol, *cname, *caddr;
    int decimals;
    unsigned flags; /* SIM_CHAIN_* by default */
} chains[] = {
    {1, "ethereum", "Ethereum", "evm", "https://etherscan.io", "Etherscan", "627eea", "ETH",
     "Ether", "0x0000000000000000000000000000000000000000", 18, 0},
    {10, "optimism", "Optimism", "evm", "https://optimistic.etherscan.io", "Etherscan", "ff0420",
     "ETH", "Ether", "0x0000000000000000000000000000000000000000", 18, SIM_CHAIN_LAGGING},
    {137, "polygon", "Polygon", "evm", "https://polygonscan.com", "PolygonScan", "8247e5", "POL",
     "POL", "0x0000000000000000000000000000000000000000", 18, SIM_CHAIN_DISABLED},
    {8453, "base", "Base", "evm", "https://basescan.org", "BaseScan", "0052ff", "ETH", "Ether",
     "0x0000000000000000000000000000000000000000", 18, 0},
    {42161, "arbitrum", "Arbitrum One", "evm", "https://arbiscan.io", "Arbiscan", "28a0f0", "ETH",
     "Ether", "0x0000000000000000000000000000000000000000", 18, 0},
    {792703809, "solana", "Solana", "svm", "https://solscan.io", "Solscan", "14f195", "SOL",
     "Solana", "11111111111111111111111111111111", 9, 0},
    {8253038, "bitcoin", "Bitcoin", "bvm", "https://mempool.space", "mempool.space", "f7931a",
     "BTC", "Bitcoin", "bc1qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq", 8, 0},
    {1337, "hyperliquid", "Hyperliquid", "hypevm", "https://app.hyperliquid.xyz/explorer",
     "Hyperliquid Explorer", "50d2c1", "USDC", "USD Coin", "0x00000000000000000000000000000000",
     8, 0},
};

static const struct chain *chain_find(int64_t id)
{
    for (size_t i = 0; i < ARRAY_LEN(chains); i++)
        if (chains[i].id == id)
            return &chains[i];
    return NULL;
}

const char *sim_chain_vm(int64_t chain_id)
{
    const struct chain *c = chain_find(chain_id);
    return c ? c->vm : "evm";
}

size_t sim_chain_count(void)
{
    return ARRAY_LEN(chains);
}

int sim_chain_index(int64_t chain_id)
{
    const struct chain *c = chain_find(chain_id);
    return c ? (int)(c - chains) : -1;
}

unsigned sim_chain_default_flags(size_t i)
{
    return i < ARRAY_LEN(chains) ? chains[i].flags : 0;
}

void sj_chains(struct sbuf *b, const unsigned char *flags)
{
    sbuf_adds(b, "{\"chains\":[");
    for (size_t i = 0; i < ARRAY_LEN(chains); i++) {
        const struct chain *c = &chains[i];
        unsigned f = flags ? flags[i] : c->flags;
        if (i)
            sbuf_add(b, ",", 1);
        sbuf_adds(b, "{\"id\":");
        sbuf_jint(b, c->id);
        sbuf_adds(b, ",\"name\":");
        sbuf_jstr(b, c->name);
        sbuf_adds(b, ",\"displayName\":");
        sbuf_jstr(b, c->display);
        sbuf_adds(b, ",\"vmType\":");
        sbuf_jstr(b, c->vm);
        sbuf_adds(b, ",\"explorerUrl\":");
        sbuf_jstr(b, c->explorer);
        sbuf_adds(b, ",\"explorerName\":");
        sbuf_jstr(b, c->explorer_name);
        sbuf_adds(b, ",\"explorerPaths\":{\"transaction\":\"/tx/{TX_HASH}\"}");
        sbuf_addf(b, ",\"depositEnabled\":%s,\"disabled\":%s,\"blockProductionLagging\":%s,"
                     "\"currency\":{\"id\":",
                  f & SIM_CHAIN_DISABLED ? "false" : "true",
                  f & SIM_CHAIN_DISABLED ? "true" : "false",
                  f & SIM_CHAIN_LAGGING ? "true" : "false");
        char idbuf[32];
        snprintf(idbuf, sizeof(idbuf), "%s", c->symbol);
        for (char *p = idbuf; *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        sbuf_jstr(b, idbuf);
        sbuf_adds(b, ",\"symbol\":");
        sbuf_jstr(b, c->symbol);
        sbuf_adds(b, ",\"name\":");
        sbuf_jstr(b, c->cname);
        sbuf_adds(b, ",\"address\":");
        sbuf_jstr(b, c->caddr);
        sbuf_addf(b, ",\"decimals\":%d,\"supportsBridging\":true}", c->decimals);
        char icon[512];
        snprintf(icon, sizeof(icon),
                 "data:image/svg+xml,%%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 32 "
                 "32'%%3E%%3Ccircle cx='16' cy='16' r='16' fill='%%23%s'/%%3E%%3Ctext x='16' "
                 "y='21' font-size='15' font-family='sans-serif' text-anchor='middle' "
                 "fill='white'%%3E%c%%3C/text%%3E%%3C/svg%%3E",
                 c->color, c->display[0]);
        sbuf_adds(b, ",\"iconUrl\":");
        sbuf_jstr(b, icon);
        sbuf_adds(b, ",\"logoUrl\":");
        sbuf_jstr(b, icon);
        sbuf_addf(b, ",\"brandColor\":\"#%s\"}", c->color);
    }
    sbuf_adds(b, "]}");
}

/* ---- websocket ------------------------------------------------------------------------- */

#define EVENT_NAME "request.status.updated"

void sj_ready(struct sbuf *b, const char *socket_id)
{
    sbuf_adds(b, "{\"type\":\"connection\",\"status\":\"ready\",\"data\":{\"id\":");
    sbuf_jstr(b, socket_id);
    sbuf_adds(b, "}}");
}

void sj_subscribe_ack(struct sbuf *b, const char *id)
{
    sbuf_adds(b, "{\"type\":\"subscribe\",\"status\":\"success\",\"data\":{\"event\":\"" EVENT_NAME
                 "\",\"filters\":{\"id\":");
    sbuf_jstr(b, id);
    sbuf_adds(b, "}}}");
}

void sj_unsubscribe_ack(struct sbuf *b)
{
    sbuf_adds(b, "{\"type\":\"unsubscribe\",\"status\":\"success\",\"data\":{\"event\":\"" EVENT_NAME
                 "\"}}");
}

void sj_ws_error(struct sbuf *b, const char *type, const char *message)
{
    sbuf_adds(b, "{\"type\":");
    sbuf_jstr(b, type);
    sbuf_adds(b, ",\"status\":\"error\",\"data\":{\"message\":");
    sbuf_jstr(b, message);
    sbuf_adds(b, "}}");
}

static void hashes(struct sbuf *b, const struct sim_tx *t, int n)
{
    sbuf_add(b, "[", 1);
    for (int i = 0; i < n; i++) {
        if (i)
            sbuf_add(b, ",", 1);
        sbuf_jstr(b, t[i].hash);
    }
    sbuf_add(b, "]", 1);
}

/* {"address","depositAddressType","depositor","depositTxHash"} (webhook/websocket spelling) */
static void deposit_event(struct sbuf *b, const struct sim_deposit *d)
{
    sbuf_adds(b, "{\"address\":");
    sbuf_jstr(b, d->address);
    sbuf_adds(b, ",\"depositAddressType\":");
    sbuf_jstr(b, d->type);
    sbuf_adds(b, ",\"depositor\":");
    sbuf_jstr(b, d->depositor[0] ? d->depositor : NULL);
    sbuf_adds(b, ",\"depositTxHash\":");
    sbuf_jstr(b, d->tx_hash);
    sbuf_add(b, "}", 1);
}

/* status, inTxHashes, txHashes, updatedAt, originChainId, destinationChainId */
static void common_head(struct sbuf *b, const struct sim_req *r)
{
    sbuf_adds(b, "{\"status\":");
    sbuf_jstr(b, r->status);
    sbuf_adds(b, ",\"inTxHashes\":");
    hashes(b, r->in, r->nin);
    sbuf_adds(b, ",\"txHashes\":");
    hashes(b, r->out, r->nout);
    sbuf_adds(b, ",\"updatedAt\":");
    sbuf_jint(b, r->updated_ms);
    sbuf_adds(b, ",\"originChainId\":");
    sbuf_jint(b, r->origin);
    sbuf_adds(b, ",\"destinationChainId\":");
    sbuf_jint(b, r->dest);
}

static void reasons(struct sbuf *b, const struct sim_req *r)
{
    sbuf_adds(b, ",\"details\":");
    sbuf_jstr(b, r->details);
    sbuf_adds(b, ",\"failReason\":");
    sbuf_jstr(b, r->fail_reason);
    sbuf_adds(b, ",\"refundFailReason\":");
    sbuf_jstr(b, r->refund_fail_reason);
}

static void ws_data(struct sbuf *b, const struct sim_req *r, int minimal)
{
    common_head(b, r);
    if (!minimal && r->dep != NULL) {
        sbuf_adds(b, ",\"depositAddress\":");
        deposit_event(b, r->dep);
    }
    sbuf_adds(b, ",\"requestId\":");
    sbuf_jstr(b, r->id);
    if (!minimal)
        reasons(b, r);
    sbuf_add(b, "}", 1);
}

void sj_ws_event(struct sbuf *b, const struct sim_req *r, int envelope_b, int minimal,
                 int64_t published_at_ms)
{
    if (envelope_b) {
        sbuf_adds(b, "{\"data\":{\"event\":\"" EVENT_NAME "\",\"data\":");
        ws_data(b, r, minimal);
        sbuf_adds(b, "}}");
        return;
    }
    sbuf_adds(b, "{\"event\":\"" EVENT_NAME "\",\"data\":");
    ws_data(b, r, minimal);
    sbuf_adds(b, ",\"publishedAt\":");
    sbuf_jint(b, published_at_ms);
    sbuf_add(b, "}", 1);
}

/* ---- HTTP bodies ------------------------------------------------------------------------- */

void sj_status_v3(struct sbuf *b, const struct sim_req *r)
{
    sbuf_adds(b, "{\"status\":");
    sbuf_jstr(b, r->status);
    if (r->details != NULL) {
        sbuf_adds(b, ",\"details\":");
        sbuf_jstr(b, r->details);
    }
    sbuf_adds(b, ",\"inTxHashes\":");
    hashes(b, r->in, r->nin);
    sbuf_adds(b, ",\"txHashes\":");
    hashes(b, r->out, r->nout);
    sbuf_adds(b, ",\"updatedAt\":");
    sbuf_jint(b, r->updated_ms);
    sbuf_adds(b, ",\"originChainId\":");
    sbuf_jint(b, r->origin);
    sbuf_adds(b, ",\"destinationChainId\":");
    sbuf_jint(b, r->dest);
    sbuf_adds(b, ",\"quoteCreatedAt\":");
    sbuf_jint(b, r->quote_created_ms);
    sbuf_adds(b, ",\"failReason\":");
    sbuf_jstr(b, r->fail_reason);
    sbuf_adds(b, ",\"refundFailReason\":");
    sbuf_jstr(b, r->refund_fail_reason);
    sbuf_add(b, "}", 1);
}

void sj_webhook(struct sbuf *b, const struct sim_req *r, int64_t timestamp_ms)
{
    sbuf_adds(b, "{\"event\":\"" EVENT_NAME "\",\"timestamp\":");
    sbuf_jint(b, timestamp_ms);
    sbuf_adds(b, ",\"data\":");
    common_head(b, r);
    sbuf_adds(b, ",\"depositAddress\":");
    if (r->dep != NULL)
        deposit_event(b, r->dep);
    else
        sbuf_add(b, "null", 4);
    sbuf_adds(b, ",\"requestId\":");
    sbuf_jstr(b, r->id);
    sbuf_adds(b, ",\"referrer\":");
    sbuf_jstr(b, r->referrer);
    reasons(b, r);
    sbuf_adds(b, "}}");
}

void sj_error(struct sbuf *b, const char *message, const char *error_code)
{
    sbuf_adds(b, "{\"message\":");
    sbuf_jstr(b, message);
    sbuf_adds(b, ",\"errorCode\":");
    sbuf_jstr(b, error_code);
    sbuf_add(b, "}", 1);
}

/* "N/A" is null in /requests/v3. */
static void v3_reason(struct sbuf *b, const char *s)
{
    sbuf_jstr(b, s == NULL || strcmp(s, "N/A") == 0 ? NULL : s);
}

/* A Bitcoin-origin request is pending from the deposit's mempool sighting (upstream-protocol.md
 * section 3): while it is pending, its deposit inTxs have no block yet ("block": null). */
static int in_mempool(const struct sim_req *r, const struct sim_tx *t, int out)
{
    return !out && r->origin == SIM_BITCOIN_CHAIN && t->chain_id == r->origin &&
           strcmp(r->status, "pending") == 0;
}

static void v3_tx(struct sbuf *b, const struct sim_req *r, const struct sim_tx *t, int out)
{
    sbuf_adds(b, "{\"txHash\":");
    sbuf_jstr(b, t->hash);
    sbuf_adds(b, ",\"fee\":\"");
    sbuf_jint(b, t->fee);
    sbuf_adds(b, "\",\"block\":");
    if (in_mempool(r, t, out))
        sbuf_add(b, "null", 4);
    else
        sbuf_jint(b, t->block);
    sbuf_adds(b, ",\"type\":\"onchain\",\"chainId\":");
    sbuf_jint(b, t->chain_id);
    sbuf_adds(b, ",\"timestamp\":");
    sbuf_jint(b, t->at_ms / 1000);
    sbuf_adds(b, t->failed ? ",\"status\":\"failure\",\"data\":{\"from\":"
                           : ",\"status\":\"success\",\"data\":{\"from\":");
    sbuf_jstr(b, out ? (r->dep ? r->dep->address : "relay-solver") : r->user);
    sbuf_adds(b, ",\"to\":");
    sbuf_jstr(b, out ? (t->kind == SIM_TX_REFUND ? r->user : r->recipient)
                     : (r->dep ? r->dep->address : "relay-depository"));
    sbuf_adds(b, ",\"data\":\"0x\",\"value\":\"");
    sbuf_jint(b, r->amount_wei);
    sbuf_adds(b, "\"}}");
}

static void v3_currency(struct sbuf *b, int64_t chain, int64_t amount)
{
    const struct chain *c = chain_find(chain);
    sbuf_adds(b, "{\"currency\":{\"chainId\":");
    sbuf_jint(b, chain);
    sbuf_adds(b, ",\"address\":");
    sbuf_jstr(b, c ? c->caddr : "0x0000000000000000000000000000000000000000");
    sbuf_adds(b, ",\"symbol\":");
    sbuf_jstr(b, c ? c->symbol : "ETH");
    sbuf_adds(b, ",\"name\":");
    sbuf_jstr(b, c ? c->cname : "Ether");
    sbuf_addf(b, ",\"decimals\":%d},\"amount\":\"", c ? c->decimals : 18);
    sbuf_jint(b, amount);
    sbuf_adds(b, "\"}");
}

static void v3_route(struct sbuf *b, const struct sim_req *r)
{
    int64_t in = r->amount_wei, out = r->amount_wei - r->amount_wei / 500;
    sbuf_adds(b, "{\"origin\":{\"inputCurrency\":");
    v3_currency(b, r->origin, in);
    sbuf_adds(b, ",\"outputCurrency\":");
    v3_currency(b, r->origin, in);
    sbuf_adds(b, "},\"destination\":{\"inputCurrency\":");
    v3_currency(b, r->dest, out);
    sbuf_adds(b, ",\"outputCurrency\":");
    v3_currency(b, r->dest, out);
    sbuf_adds(b, "}}");
}

/* metadata.reorg: what the indexer found when the deposit's block was reorganised away. */
static void v3_reorg(struct sbuf *b, const struct sim_reorg *g)
{
    sbuf_adds(b, "{\"reorg\":{\"detectedAt\":");
    sbuf_jint(b, g->detected_ms);
    sbuf_adds(b, ",\"source\":\"indexer\",\"reason\":\"block reorganisation\",\"details\":null,"
                 "\"failReason\":");
    sbuf_jstr(b, g->fail_reason);
    sbuf_adds(b, ",\"action\":\"refund\",\"blockNumber\":");
    sbuf_jint(b, g->block);
    sbuf_adds(b, ",\"blockHash\":");
    sbuf_jstr(b, g->block_hash);
    sbuf_adds(b, ",\"receiptStatus\":0}}");
}

void sj_requests_v3_item(struct sbuf *b, const struct sim_req *r)
{
    char iso[80]; /* 25 bytes in practice; room for any int fields gmtime_r can give */
    /* /requests/v3 has no "delayed": such a request is still pending there. */
    const char *st = strcmp(r->status, "delayed") == 0 ? "pending" : r->status;
    sbuf_adds(b, "{\"id\":");
    sbuf_jstr(b, r->id);
    sbuf_adds(b, ",\"status\":");
    sbuf_jstr(b, st);
    sbuf_adds(b, ",\"user\":");
    sbuf_jstr(b, r->user);
    sbuf_adds(b, ",\"recipient\":");
    sbuf_jstr(b, r->recipient);
    sbuf_adds(b, ",\"sender\":");
    sbuf_jstr(b, r->user);
    sbuf_adds(b, ",\"refundTo\":");
    sbuf_jstr(b, r->user);
    sbuf_adds(b, ",\"supersededByRequestId\":null,\"depositAddress\":");
    if (r->dep != NULL) {
        sbuf_adds(b, "{\"address\":");
        sbuf_jstr(b, r->dep->address);
        sbuf_adds(b, ",\"type\":");
        sbuf_jstr(b, r->dep->type);
        sbuf_adds(b, ",\"depositor\":");
        sbuf_jstr(b, r->dep->depositor[0] ? r->dep->depositor : NULL);
        sbuf_adds(b, ",\"depositTxHash\":");
        sbuf_jstr(b, r->dep->tx_hash);
        sbuf_adds(b, ",\"recoveryAddress\":");
        sbuf_jstr(b, r->dep->recovery);
        sbuf_add(b, "}", 1);
    } else {
        sbuf_add(b, "null", 4);
    }
    sbuf_adds(b, ",\"data\":{\"failReason\":");
    v3_reason(b, r->fail_reason);
    sbuf_adds(b, ",\"refundFailReason\":");
    v3_reason(b, r->refund_fail_reason);
    sbuf_adds(b, ",\"fees\":");
    sim_facts_fees(b, r); /* quoted from the quote on, actual at fill (sim_facts.c) */
    sbuf_adds(b, ",\"inTxs\":[");
    for (int i = 0; i < r->nin; i++) {
        if (i)
            sbuf_add(b, ",", 1);
        v3_tx(b, r, &r->in[i], 0);
    }
    sbuf_adds(b, "],\"outTxs\":[");
    for (int i = 0; i < r->nout; i++) {
        if (i)
            sbuf_add(b, ",", 1);
        v3_tx(b, r, &r->out[i], 1);
    }
    sbuf_adds(b, "],\"route\":{\"quoted\":");
    v3_route(b, r);
    sbuf_adds(b, ",\"actual\":");
    if (sim_facts_route_actual(r)) /* from the deposit on */
        v3_route(b, r);
    else
        sbuf_add(b, "null", 4);
    sbuf_adds(b, "}}");
    if (r->reorg != NULL) { /* absent until a reorg, like the upstream's optional metadata */
        sbuf_adds(b, ",\"metadata\":");
        v3_reorg(b, r->reorg);
    }
    sbuf_adds(b, ",\"createdAt\":");
    sim_iso8601(r->created_ms, iso, sizeof(iso));
    sbuf_jstr(b, iso);
    sbuf_adds(b, ",\"updatedAt\":");
    sim_iso8601(r->updated_ms, iso, sizeof(iso));
    sbuf_jstr(b, iso);
    sbuf_add(b, "}", 1);
}
