/* facts.h - request facts (DESIGN "Request facts"): what a GET /requests/v3 item says about a
 * payment beyond its status (wallets, creation time, amounts and currencies, transactions with
 * explorer links, fees, route), as one canonical compact JSON object, and the explorer-link
 * lookup built from the upstream's chain list (GET /chains). docs/facts.md maps every field.
 *
 * The facts object (every key always present, in this order; null = the upstream did not say:
 * absent, null or "" in the item):
 *   {"createdAt": ms|null, "updatedAt": ms|null,
 *    "user", "sender", "recipient", "refundTo", "referrer", "requestType": string|null,
 *    "depositAddress": {"address","type","depositor","depositTxHash","recoveryAddress"}|null,
 *    "currencyIn", "currencyOut", "refundCurrency": <amount>|null,
 *    "inTxs", "outTxs": [<tx>...] (possibly empty),
 *    "fees", "appFees", "route": the item's data.fees / data.appFees / data.route as given
 *                                (compact text of the upstream's object) | null,
 *    "orderId", "supersededByRequestId": string|null}
 *   <tx>     = {"txHash", "chainId", "explorerUrl", "block", "timestamp" (ms: the upstream's
 *               seconds x 1000), "status", "type", "fee", "feeUsd"}; txHash is never null
 *   <amount> = {"chainId", "address", "symbol", "name", "decimals", "amount",
 *               "amountFormatted", "amountUsd", "minimumAmount", "basis": "actual"|"quoted"|null}
 * currencyIn / currencyOut are read from data.route: the actual side when the item has it,
 * else the quoted one (basis says which); refundCurrency from data.refundCurrencyData.
 *
 * Bounds (a hostile upstream): at most PROTO_MAX_HASHES transactions per list (more is
 * PROTO_ETOOLONG, as the status normaliser says), wallets and addresses at most
 * PROTO_FACTS_MAX_ADDR bytes, other strings PROTO_FACTS_MAX_SHORT; fees / appFees over
 * PROTO_FACTS_MAX_BLOB bytes, route over PROTO_FACTS_MAX_ROUTE bytes, or any of them nested
 * deeper than PROTO_MAX_JSON_DEPTH become null (best effort, like reorg details); an explorer
 * link over PROTO_EXPLORER_MAX_LINK bytes is null. The whole object is therefore at most
 * about 400 KiB (the fixture items: 3.3 to 5.3 KiB, about half of it the route). Derived
 * values (currencyIn/Out, refundCurrency) are best effort: a member of the wrong type there
 * becomes null; a top-level or transaction field of the wrong type (or out of range, over its
 * bound, with unexpected characters) is a typed rejection (PROTO_ETYPE / PROTO_ERANGE /
 * PROTO_ETOOLONG / PROTO_EVALUE, err->field the item path: "data.inTxs[0].chainId").
 * Other strings: wallets, addresses, hashes, enums and transaction fees are printable ASCII
 * without space, quote or backslash (PROTO_EVALUE otherwise); requestType and referrer are
 * free text.
 *
 * Every function is pure, returns 0 or a PROTO_E* code (PROTO_ENOMEM on allocation failure;
 * then nothing is handed out) and runs on any thread. */
#ifndef PROTO_FACTS_H
#define PROTO_FACTS_H

#include "protocol/json.h"
#include "protocol/proto.h"

#include <stddef.h>
#include <stdint.h>

#define PROTO_FACTS_MAX_ADDR 256        /* user, sender, recipient, refundTo, addresses */
#define PROTO_FACTS_MAX_SHORT 128       /* requestType, referrer, fee and amount texts, ... */
#define PROTO_FACTS_MAX_BLOB 4096       /* compact fees / appFees text kept */
#define PROTO_FACTS_MAX_ROUTE 16384     /* compact route text kept */
#define PROTO_FACTS_MAX_INPUT PROTO_MAX_INPUT /* a facts text read back (merge, relink) */

/* ---- explorer links ------------------------------------------------------------------------ */

/* The explorer of one chain: a web URL base (http or https, trailing '/' removed), the
 * transaction path (explorerPaths.transaction, "" when the chain names none) and the query
 * (explorerQueryParams as "k=v&k2=v2", form-encoded; "" when none). */
struct proto_explorer {
    int64_t chain_id;
    char *base, *tx_path, *query;
};

/* chainId -> explorer, sorted by chain id (one entry per id: the first one listed wins).
 * Start from {0}; free with proto_explorers_cleanup. */
struct proto_explorers {
    struct proto_explorer *v;
    size_t n, cap;
};

#define PROTO_EXPLORERS_MAX 4096            /* chains kept from one list */
#define PROTO_EXPLORER_MAX_URL 512          /* explorerUrl, path and query, each */
#define PROTO_EXPLORER_MAX_LINK 2048        /* one built link */
#define PROTO_CHAINS_MAX_INPUT (16 * 1024 * 1024) /* a /chains body (tokens per chain) */

/* Add (or replace) the explorer of chain_id: copies the strings (tx_path and query may be NULL
 * for none). PROTO_EVALUE when base is not an http(s) URL without spaces, quotes, '<', '>' or
 * backslashes, or a part is over PROTO_EXPLORER_MAX_URL; PROTO_ERANGE for a chain id outside
 * 1..PROTO_MAX_CHAIN_ID; PROTO_ETOOLONG past PROTO_EXPLORERS_MAX chains. */
int proto_explorers_add(struct proto_explorers *ex, int64_t chain_id, const char *base,
                        const char *tx_path, const char *query);

/* Build *ex (initialised by the callee) from a GET /chains body {"chains":[{id, explorerUrl,
 * explorerPaths: {transaction}, explorerQueryParams}, ...]} (the upstream's body or
 * chains_slim() of it, at most PROTO_CHAINS_MAX_INPUT bytes). Chains without a usable
 * explorer (no integer id, no http(s) explorerUrl, parts over bounds) are skipped; query
 * params whose value is a string, integer or boolean are kept, others skipped. Returns 0,
 * PROTO_EJSON / PROTO_ETOOLONG, PROTO_ETYPE when the body is not an object with a "chains"
 * array, or PROTO_ENOMEM (then *ex is empty). */
int proto_explorers_from_chains(const char *buf, size_t len, struct proto_explorers *ex,
                                struct proto_err *err);

/* Free the entries; *ex becomes empty. NULL-safe. */
void proto_explorers_cleanup(struct proto_explorers *ex);

/* The entry of chain_id, or NULL (ex may be NULL). */
const struct proto_explorer *proto_explorers_find(const struct proto_explorers *ex,
                                                  int64_t chain_id);

/* The explorer link of hash[0..n) on chain_id into a malloc'd string (*out), or *out = NULL
 * when the chain is unknown (or ex is NULL), hash is empty or the link would be over
 * PROTO_EXPLORER_MAX_LINK bytes. The rule (the page's,
 * relay/www/app.js): base + path with every "{TX_HASH}" replaced by the hash (a '/' put
 * between when the path does not start with one); a path without the placeholder: base + "/"
 * + the path without its outer slashes + "/" + hash; no path: base + "/tx/" + hash; then
 * "?query" (or "&query" when the URL has a '?'). The hash is percent-encoded as
 * encodeURIComponent does. Returns 0 or PROTO_ENOMEM. */
int proto_explorer_tx_url(const struct proto_explorers *ex, int64_t chain_id, const char *hash,
                          size_t n, char **out);

/* ---- facts --------------------------------------------------------------------------------- */

/* The facts of one /requests/v3 item (the bytes of one element of "requests") into *out
 * (malloc'd compact JSON text, *out_len its length; caller frees), with explorer links from
 * ex (NULL: every explorerUrl null). The item must be an object; "id" and "status" are not
 * read (the status normaliser's business); createdAt / updatedAt must be ISO-8601 when
 * present. On failure *out is NULL and err says why. */
int proto_facts_from_item(const char *buf, size_t len, const struct proto_explorers *ex,
                          char **out, size_t *out_len, struct proto_err *err);

/* The same for an item already parsed with pjson_parse (a page walker); pfx is the item's JSON
 * path for errors ("requests[3].", or ""). */
int proto_facts_from_pjson(const struct pjson *item, const char *pfx,
                           const struct proto_explorers *ex, char **out, size_t *out_len,
                           struct proto_err *err);

/* Merge two facts texts of one request (canonical ones, as built above or merged before) into
 * a new canonical text. The one with the later updatedAt is the newer (a tie or two nulls:
 * b); the older may arrive second (feed overlap, a read by id racing the feed). Rules:
 *   - scalars and objects (wallets, createdAt, depositAddress, currencies, orderId, ...): the
 *     newer's value unless it is null, then the older's;
 *   - inTxs / outTxs: the newer's list unless it is empty, then the older's (outTxs appear at
 *     fill, a sparse answer must not erase them; a reorg replaces the deposit list); within
 *     the list kept, a transaction whose txHash the other list also has takes the other's
 *     values for its null fields (block, timestamp, explorerUrl, ...);
 *   - fees, appFees, route: member by member (fees.quoted, fees.actual, route.actual, ...): the
 *     newer's unless absent or null, then the older's (quoted at quote time, actual at fill);
 *   - updatedAt: the later one.
 * The result is canonical (proto_facts_merge(x, x) == x for canonical x). Unknown keys of the
 * inputs are dropped. PROTO_EJSON / PROTO_ETYPE / ... when an input is not a facts text. */
int proto_facts_merge(const char *a, size_t alen, const char *b, size_t blen, char **out,
                      size_t *out_len, struct proto_err *err);

/* A facts text with every explorerUrl built again from ex (NULL: all null): links of facts
 * stored before the chain list was known, or stored without links. Canonical output. */
int proto_facts_relink(const char *buf, size_t len, const struct proto_explorers *ex,
                       char **out, size_t *out_len, struct proto_err *err);

/* The wallets of a facts text (endpoint filter "users": user, sender or recipient): the
 * non-null ones among user, sender, recipient, in that order, a repeated one (the same text,
 * ASCII case-insensitive: 0x addresses) kept once, copied into out[0..*n) (at most 3,
 * NUL-terminated, each at most PROTO_FACTS_MAX_ADDR bytes: facts.h bounds them). Returns 0,
 * PROTO_EJSON / PROTO_ETOOLONG (not JSON), PROTO_ETYPE (not an object, or a wallet that is
 * not a string or null) or PROTO_ENOMEM, with err (may be NULL) filled; *n is 0 then. */
int proto_facts_wallets(const char *facts, size_t len, char out[3][PROTO_FACTS_MAX_ADDR + 1],
                        size_t *n, struct proto_err *err);

#endif
