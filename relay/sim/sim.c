/* sim.c - `statusrelay sim`: settings, --help, start-up and shutdown of the upstream
 * simulator, the load generator, and the fan-out of each status change (sim_publish).
 *
 * One lws context on one port serves the websocket (protocols[1], default for upgrades), the
 * upstream HTTP endpoints and /_sim/ (protocols[0]). Everything runs on this thread's lws
 * service loop; only upstream webhooks are sent from their own thread (sim_webhook.c).
 * SIGINT/SIGTERM end the loop; everything is freed in reverse order of creation.
 * runs on: the main thread (the simulator's lws thread). */
#include "relay/commands.h"
#include "relay/common/log.h"
#include "relay/common/settings.h"
#include "relay/sim/sim.h"
#include "relay/sim/sim_http.h"
#include "relay/sim/sim_json.h"
#include "relay/sim/sim_model.h"
#include "relay/sim/sim_webhook.h"
#include "relay/sim/sim_ws.h"
#include "relay/common/util.h"

#include <curl/curl.h>
#include <libwebsockets.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GEN_TICK_MS 10

#define O(f) offsetof(struct sim_config, f)
static const struct setting sim_settings[] = {
    {"listen", SET_HOSTPORT, O(listen), "127.0.0.1:7070", 0, 0,
     "HOST:PORT for everything: ws://HOST:PORT/, the upstream HTTP endpoints and /_sim/ "
     "(port 0: any free port, see --port-file)"},
    {"seed", SET_INT, O(seed), "1", 0, 0,
     "seed for ids, hashes, addresses, paths and timings of requests"},
    {"rate", SET_INT, O(rate), "0", 0, 0,
     "new generated requests per second (load mode); 0 = only scripted ones"},
    {"duration", SET_DURATION, O(duration_ms), "0s", 0, 0,
     "how long the generator runs (0s = until stopped); lifecycles in flight still finish"},
    {"exit-when-done", SET_BOOL, O(exit_when_done), "false", 0, 0,
     "exit once --duration is over and every generated lifecycle has finished"},
    {"api-key", SET_STR, O(api_key), NULL, 1, 0,
     "when set: required as ?apiKey= on the websocket and as x-api-key on /requests/v3; a "
     "wrong x-api-key is refused everywhere; signs upstream webhooks"},
    {"webhook-url", SET_STR, O(webhook_url), NULL, 0, 0,
     "POST an upstream webhook for every status change to this URL"},
    {"webhook-secret", SET_STR, O(webhook_secret), NULL, 1, 0,
     "key for X-Signature-SHA256 (default: the API key, else the empty string)"},
    {"webhook-retries", SET_INT, O(webhook_retries), "10", 0, 0,
     "retries of a failed webhook (backoff 1s doubling, at most 60s)"},
    {"webhook-timeout", SET_DURATION, O(webhook_timeout_ms), "10s", 0, 100,
     "timeout of one webhook attempt"},
    {"rate-limit", SET_INT, O(rate_limit), "200", 0, 0,
     "upstream HTTP calls per minute per API key (sliding window; no key = one shared "
     "bucket); 0 = unlimited; over it: 429 with Retry-After"},
    {"step", SET_DURATION, O(step_ms), "2s", 0, 1,
     "base time between lifecycle steps of generated requests (each step +-50%)"},
    {"mix", SET_STR, O(mix),
     "success:55,depositing:8,delayed:6,refund:9,failure:4,deposit-address:10,solana:8", 0, 0,
     "weights of the generated lifecycles"},
    {"envelope", SET_STR, O(envelope), "A", 0, 0,
     "websocket event envelope: A {event,data,publishedAt} or B {data:{event,data}}"},
    {"retain", SET_INT, O(retain), "100000", 0, 1,
     "requests kept in memory (the oldest finished ones are forgotten beyond it)"},
    {"ws-max-queue", SET_INT, O(ws_max_queue), "100000", 0, 0,
     "frames queued for one websocket client before it is closed with 1008; 0 = no limit"},
    {"port-file", SET_STR, O(port_file), NULL, 0, 0,
     "write the port actually bound to this file once listening"},
    {"log-level", SET_LEVEL, O(log_level), "info", 0, 0, "error, warn, info or debug"},
    {NULL, 0, 0, NULL, 0, 0, NULL},
};
#undef O

static const char help_text[] =
    "usage: statusrelay sim [options]\n"
    "\n"
    "Simulates the upstream's status surface on one port, speaking its wire formats:\n"
    "  ws://HOST:PORT/[?apiKey=KEY]   the status websocket: greeting\n"
    "      {\"type\":\"connection\",\"status\":\"ready\",\"data\":{\"id\":...}} first, then\n"
    "      {\"type\":\"subscribe\"|\"unsubscribe\",\"event\":\"request.status.updated\",\n"
    "       \"filters\":{\"id\":\"<requestId>\"}} answered by the upstream's acks, and events\n"
    "      {\"event\":\"request.status.updated\",\"data\":{...},\"publishedAt\":ms} (envelope A)\n"
    "      or {\"data\":{\"event\":...,\"data\":{...}}} (envelope B) for subscribed ids only.\n"
    "  GET /intents/status/v3?requestId=ID    status, details, inTxHashes, txHashes,\n"
    "      updatedAt, originChainId, destinationChainId, quoteCreatedAt, failReason,\n"
    "      refundFailReason (x-api-key optional)\n"
    "  GET /requests/v3   x-api-key required when --api-key is set; limit (1..50, default 20),\n"
    "      continuation (opaque; absent on the last page), sortBy createdAt|updatedAt|\n"
    "      amountUsd, sortDirection asc|desc (default desc), startTimestamp/endTimestamp\n"
    "      (unix seconds, inclusive, on the sort field), id, user, status, originChainId,\n"
    "      destinationChainId, chainId, depositAddress, apiKey (comma list: the requests\n"
    "      made with one of these keys; POST /_sim/requests {\"apiKey\"}, default --api-key);\n"
    "      v3 items with ISO createdAt/updatedAt,\n"
    "      data.inTxs/outTxs (timestamp in seconds, status success|failure), data.failReason\n"
    "      null instead of N/A; after a reorg the deposit's inTx has status failure and the\n"
    "      item carries \"metadata\": {\"reorg\": {\"detectedAt\" (ms), \"source\": \"indexer\",\n"
    "      \"reason\", \"details\", \"failReason\", \"action\": \"refund\", \"blockNumber\",\n"
    "      \"blockHash\", \"receiptStatus\": 0}} (no \"metadata\" before)\n"
    "  GET /chains        1, 10, 137, 8453, 42161, 792703809 (Solana), 8253038 (Bitcoin), 1337\n"
    "  Errors: {\"message\":...,\"errorCode\":...}: 400 INVALID_INPUT_PARAMETERS, 401\n"
    "      UNAUTHORIZED, 404 REQUEST_NOT_FOUND, 429 RATE_LIMITED (+ Retry-After seconds).\n"
    "  Upstream webhooks (--webhook-url): POST {\"event\",\"timestamp\",\"data\"} with\n"
    "      X-Signature-Timestamp (ms) and X-Signature-SHA256 = hex HMAC-SHA256(API key,\n"
    "      timestamp + \".\" + body), retried with backoff on failure.\n"
    "\n"
    "Lifecycles (--mix, or \"lifecycle\" in POST /_sim/requests):\n"
    "  success          waiting > pending > submitted > success\n"
    "  depositing       depositing > pending > submitted > success (execute flow)\n"
    "  delayed          waiting > pending > delayed > submitted > success\n"
    "  refund           waiting > pending > failure > pending > refund (failReason kept)\n"
    "  failure          waiting > pending > failure (refundFailReason AMOUNT_TOO_LOW_TO_REFUND)\n"
    "  deposit-address  as success, with depositAddress (depositTxHash null until pending)\n"
    "  solana           as success from chain 792703809 (base58 hashes)\n"
    "  reorg            waiting > pending > submitted > success > failure: DEPOSIT_REORGED, the\n"
    "                   deposit inTx fails and metadata.reorg appears in /requests/v3\n"
    "  double-spend     waiting > pending > submitted > success > refund: DOUBLE_SPEND (a refund\n"
    "                   tx joins the fill in txHashes)\n"
    "  late-refund      waiting > pending > failure (SOLVER_CAPACITY_EXCEEDED) > refund after\n"
    "                   10x --step (stepMs)\n"
    "  never-deposited  waiting, and nothing ever again (its path ends at once)\n"
    "  The last four are not in the default --mix. failReason is N/A unless the status is\n"
    "  failure, fallback or refund.\n"
    "  Hashes follow the chain: 0x+64 hex (EVM), base58 (Solana), 64 hex (Bitcoin).\n"
    "  A Bitcoin-origin request (8253038) is pending from the mempool sighting: while pending,\n"
    "  its deposit inTxs in /requests/v3 have \"block\": null. Requests made through the\n"
    "  control API get a random origin other than Bitcoin unless they name originChainId.\n"
    "\n"
    "Control API (JSON; not rate limited, not faulted, not counted as upstream calls):\n"
    "  POST /_sim/requests  {\"id\"?, \"lifecycle\"? | \"path\"?: [\"waiting\", {\"status\":\n"
    "        \"failure\", \"failReason\"?, \"refundFailReason\"?, \"details\"?, \"delayMs\"?,\n"
    "        \"reorg\"?: true}, ...] (any status may follow success or refund; every change\n"
    "        gets a newer updatedAt, by 1 ms at least),\n"
    "        \"stepMs\"? (0/absent: advance by hand), \"originChainId\"?, \"destinationChainId\"?,\n"
    "        \"depositAddress\"?: true|{\"type\":\"open\"|\"strict\"}, \"referrer\"?, \"user\"?,\n"
    "        \"autoHashes\"?: true}  -> 201 the request (id, status, path, history, statusV3)\n"
    "        \"count\"?: N (2..100000: N such requests with generated ids -> 201 {\"created\",\n"
    "        \"firstSeq\", \"lastSeq\"}; their ids: GET /_sim/requests?after=), \"spanMs\"?: with\n"
    "        count, each request goes through its whole path at once and its times are\n"
    "        spread evenly over the span before now (the n-th of N: span x (N-n)/N ago),\n"
    "        \"agoMs\"?: the span ends that long before now\n"
    "  GET  /_sim/requests?after=SEQ&limit=N     ids in creation order (for load clients)\n"
    "  GET  /_sim/requests/{id}                  the request with its history and counters:\n"
    "        statusPolls (GET /intents/status/v3 for it, any answer), requestsReads (GET\n"
    "        /requests/v3 with id=, any answer), subscribes (subscribe messages, every\n"
    "        connection); calls made before the request existed count too (up to 4096 ids)\n"
    "  POST /_sim/requests/{id}/advance          next step now (409 at the end of the path)\n"
    "  POST /_sim/requests/{id}/status  {\"status\", \"failReason\"?, \"refundFailReason\"?,\n"
    "        \"details\"?, \"inTxHashes\"?, \"txHashes\"?, \"updatedAt\"?, \"autoHashes\"?,\n"
    "        \"reorg\"?}   reorg (here or on a path step): true marks the deposit inTx failed\n"
    "        and adds metadata.reorg (failReason DEPOSIT_REORGED unless one is given)\n"
    "  POST /_sim/faults  any of (GET reads them, DELETE or POST /_sim/faults/reset clears):\n"
    "        \"dropWs\": \"abrupt\" | \"1012\" | code    drop every websocket now (abrupt: no\n"
    "                                            close frame; else that close code)\n"
    "        \"wsRefuse\": bool          refuse new websocket upgrades (503)\n"
    "        \"silent\": bool            no events on the websocket (acks, pongs and HTTP go on)\n"
    "        \"delayMs\": N              events leave N ms late\n"
    "        \"duplicate\": bool         every event frame twice\n"
    "        \"reorder\": bool           each request's events swapped pairwise (held <= 1 s)\n"
    "        \"malformed\": N            N malformed frames to every connection now\n"
    "        \"envelope\": \"A\"|\"B\"       event envelope\n"
    "        \"wsMinimal\": bool         events without depositAddress/details/reasons\n"
    "        \"httpErrorRate\": 0..1     fraction of upstream calls that fail\n"
    "        \"httpErrorCount\": N       the next N upstream calls fail\n"
    "        \"httpErrorStatus\": 429|500|502|503|504 (0: random 429/500/503); bodies\n"
    "                                  RATE_LIMITED, PRICE_FETCH_FAILED, HTML 502,\n"
    "                                  SERVICE_UNAVAILABLE, GATEWAY_TIMEOUT\n"
    "        \"httpErrorPath\": \"/requests/v3\"   only paths with this prefix\n"
    "        \"httpDelayMs\": N          upstream answers held N ms\n"
    "        \"rateLimitPerMin\": N      per-key limit (0 = unlimited)\n"
    "        \"refuseKey\": 401|403|0   every upstream call with an x-api-key gets that status\n"
    "                                  (a revoked key: UNAUTHORIZED / FORBIDDEN bodies)\n"
    "  GET  /_sim/stats   counters: ws (connections, frames, events, acks, subscriptions,\n"
    "        drops), http (total, byPath -> status -> count, rateLimited, injected), webhooks\n"
    "        (queued, sent, delivered, failed, retries), requests, load; DELETE (or POST\n"
    "        /_sim/stats/reset) resets them and every request's counters\n"
    "  GET  /_sim/timeline  upstream calls per 100 ms since the last reset: {\"startMs\",\n"
    "        \"bucketMs\": 100, \"counts\"} (10 minutes; later calls count in the last bucket)\n"
    "  GET|POST /_sim/load  {\"rate\": N, \"durationMs\"?: N}  start/stop the generator\n"
    "  GET|POST|DELETE /_sim/chains  the GET /chains list (not counted as an upstream call);\n"
    "        POST {\"id\", \"disabled\"?: bool, \"blockProductionLagging\"?: bool} changes one\n"
    "        chain's marks, DELETE restores the defaults (Optimism lagging, Polygon disabled)\n"
    "  GET  /_sim/health\n"
    "\n"
    "Guessed (undocumented upstream behaviour): the 404/400/401/429 bodies and error codes,\n"
    "the X-Signature-Timestamp unit (ms), /requests/v3 dropping continuation on the last page,\n"
    "\"delayed\" shown as pending in /requests/v3, no server pings, the error frame for a\n"
    "subscribe without filters.id, the shape of metadata.reorg.\n"
    "\n"
    "Settings (flag, environment variable, default):\n";

/* The simulator: one per process (sim_main runs once), zeroed until sim_main fills it. A file
 * static, not a heap object, so the signal handler reaches it without allocation (g_sim). */
static struct sim the_sim;
static struct sim *g_sim; /* for the signal handler only: &the_sim while the loop runs */

static void on_signal(int sig)
{
    if (g_sim != NULL) {
        g_sim->stop = 1;
        if (g_sim->ctx != NULL)
            lws_cancel_service(g_sim->ctx);
    }
}

/* ---- fan-out ------------------------------------------------------------------------------- */

static void sim_publish(struct sim *s, struct sim_req *r)
{
    s->stats.status_changes++;
    if (r->nhist == 1)
        s->stats.requests_created++;
    if (sim_ws_subscribed(s->ws, r->id)) {
        if (s->faults.silent) {
            s->stats.ws_suppressed++;
        } else {
            int64_t delay = s->faults.delay_ms;
            struct sbuf b;
            sbuf_init(&b, LWS_PRE);
            sj_ws_event(&b, r, s->faults.envelope_b, s->faults.ws_minimal, wall_ms() + delay);
            struct sim_frame *f = sim_frame_new(&b, 0, SIM_FRAME_EVENT);
            f->due_ms = delay > 0 ? mono_ms() + delay : 0;
            sim_ws_publish(s->ws, r->id, f);
        }
    }
    if (s->wh != NULL) {
        struct sbuf b;
        sbuf_init(&b, 0);
        sj_webhook(&b, r, wall_ms());
        size_t len = sbuf_textlen(&b);
        sim_webhook_post(s->wh, sbuf_take(&b), len);
    }
}

static void on_change(void *arg, struct sim_req *r)
{
    sim_publish(arg, r);
}

/* ---- load generator ------------------------------------------------------------------------- */

static lws_sorted_usec_list_t gen_sul;

static void gen_tick(lws_sorted_usec_list_t *sul)
{
    struct sim *s = g_sim;
    int64_t now = mono_ms();
    if (s->gen_running) {
        int64_t end = s->gen_until_ms && now >= s->gen_until_ms ? s->gen_until_ms : now;
        uint64_t target = (uint64_t)(s->gen_rate * (end - s->gen_started_ms) / 1000);
        struct sim_spec spec = {0};
        spec.generated = 1;
        spec.deposit = -1;
        spec.step_ms = s->cfg.step_ms;
        for (int n = 0; s->gen_made < target && n < 20000; n++) {
            const char *err = NULL;
            if (sim_model_create(s->model, &spec, &err) == NULL) {
                log_err("generator cannot create a request", "why=\"%s\"", err);
                s->gen_running = 0;
                break;
            }
            s->gen_made++;
        }
        if (s->gen_until_ms && now >= s->gen_until_ms && s->gen_made >= target) {
            s->gen_running = 0;
            log_info("load generator finished", "made=%llu", (unsigned long long)s->gen_made);
        }
    }
    if (s->cfg.exit_when_done && !s->gen_running && s->gen_until_ms &&
        now >= s->gen_until_ms && sim_model_active(s->model) == 0) {
        log_info("every generated lifecycle finished, exiting", "made=%llu",
                 (unsigned long long)s->gen_made);
        s->stop = 1;
        lws_cancel_service(s->ctx); /* the loop would otherwise sleep in poll() */
        return;
    }
    if (s->gen_running || s->cfg.exit_when_done)
        lws_sul_schedule(s->ctx, 0, &gen_sul, gen_tick,
                         (s->gen_running ? GEN_TICK_MS : 100) * LWS_US_PER_MS);
}

void sim_load_set(struct sim *s, int64_t rate, int64_t duration_ms)
{
    int64_t now = mono_ms();
    s->gen_rate = rate;
    s->gen_started_ms = now;
    s->gen_until_ms = duration_ms > 0 ? now + duration_ms : 0;
    s->gen_made = 0;
    s->gen_running = rate > 0;
    log_info("load generator set", "rate=%lld duration_ms=%lld", (long long)rate,
             (long long)duration_ms);
    lws_sul_schedule(s->ctx, 0, &gen_sul, gen_tick, 0);
}

/* ---- start-up ------------------------------------------------------------------------------- */

static int validate(struct sim *s)
{
    struct sim_config *c = &s->cfg;
    char err[256];
    if (strcmp(c->envelope, "A") != 0 && strcmp(c->envelope, "B") != 0) {
        fprintf(stderr, "statusrelay: invalid setting STATUSRELAY_SIM_ENVELOPE (--envelope): "
                        "expected A or B, got \"%s\"\n", c->envelope);
        return -1;
    }
    if (c->api_key != NULL && c->api_key[0] == '\0') {
        free(c->api_key);
        c->api_key = NULL;
    }
    if (c->webhook_url != NULL && c->webhook_url[0] == '\0') {
        free(c->webhook_url);
        c->webhook_url = NULL;
    }
    if (c->webhook_url != NULL && strncmp(c->webhook_url, "http://", 7) != 0 &&
        strncmp(c->webhook_url, "https://", 8) != 0) {
        fprintf(stderr, "statusrelay: invalid setting STATUSRELAY_SIM_WEBHOOK_URL "
                        "(--webhook-url): expected an http:// or https:// URL, got \"%s\"\n",
                c->webhook_url);
        return -1;
    }
    if (c->exit_when_done && c->duration_ms <= 0) {
        fprintf(stderr, "statusrelay: invalid setting STATUSRELAY_SIM_EXIT_WHEN_DONE "
                        "(--exit-when-done): needs --duration\n");
        return -1;
    }
    if (sim_model_set_mix(s->model, c->mix, err, sizeof(err)) != 0) {
        fprintf(stderr, "statusrelay: invalid setting STATUSRELAY_SIM_MIX (--mix): %s, got "
                        "\"%s\"\n", err, c->mix);
        return -1;
    }
    return 0;
}

static int write_port_file(const char *path, int port)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "%d\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

/* Settings from the environment and the flags into s->cfg. Returns -1 to go on, else the
 * exit status with s->cfg freed: 0 after --help, EXIT_USAGE after a bad setting or argument
 * (one line on stderr). */
static int load_settings(struct sim *s, int argc, char **argv)
{
    const char **rest = xcalloc((size_t)argc + 1, sizeof(*rest));
    int nrest = 0, help = 0, rc = -1;
    if (settings_load(sim_settings, &s->cfg, "STATUSRELAY_SIM_", argc, argv, rest, &nrest,
                      &help) != 0) {
        rc = EXIT_USAGE;
    } else if (help) {
        fputs(help_text, stdout);
        settings_help(sim_settings, "STATUSRELAY_SIM_", stdout);
        rc = 0;
    } else if (nrest > 0) {
        fprintf(stderr, "statusrelay sim: unknown argument \"%s\" (try statusrelay sim --help)\n",
                rest[0]);
        rc = EXIT_USAGE;
    }
    free(rest);
    if (rc >= 0)
        settings_free(sim_settings, &s->cfg);
    return rc;
}

/* The lws context of the one port (host:port) into info, with its protocols (3 entries, the
 * last the terminator): protocols[0] HTTP, protocols[1] the websocket. info keeps pointers
 * to protocols and host: both must live until the context is created. */
static void context_info(struct sim *s, struct lws_context_creation_info *info,
                         struct lws_protocols *protocols, const char *host, int port)
{
    memset(protocols, 0, 3 * sizeof(*protocols));
    protocols[0].name = "http";
    protocols[0].callback = sim_http_callback;
    protocols[0].per_session_data_size = sim_http_session_size();
    protocols[1].name = "sim-ws";
    protocols[1].callback = sim_ws_callback;
    protocols[1].per_session_data_size = sim_ws_session_size();
    protocols[1].rx_buffer_size = 16384;
    /* Upgrades without Sec-WebSocket-Protocol (the upstream's clients send none) go here. */
    static const struct lws_protocol_vhost_options pvo_default = {NULL, NULL, "default", "1"};
    static const struct lws_protocol_vhost_options pvo = {NULL, &pvo_default, "sim-ws", ""};

    memset(info, 0, sizeof(*info));
    info->port = port;
    info->iface = strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0 ? NULL
                  : strcmp(host, "localhost") == 0                      ? "127.0.0.1"
                                                                        : host;
    info->protocols = protocols;
    info->pvo = &pvo;
    info->user = s;
    info->gid = -1;
    info->uid = -1;
    info->vhost_name = "default";
    info->keepalive_timeout = 30;
    info->timeout_secs = 30;
    info->max_http_header_pool = 256;
    info->max_http_header_data = 8192;
    info->pt_serv_buf_size = 64 * 1024;
    if (strchr(host, ':') == NULL)
        info->options |= LWS_SERVER_OPTION_DISABLE_IPV6;
}

/* SIGINT/SIGTERM stop the loop (on_signal through g_sim); SIGPIPE is ignored. */
static void install_signals(struct sim *s)
{
    g_sim = s;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The upstream webhook sender when --webhook-url is set. Returns 0, or -1 after logging. */
static int start_webhook(struct sim *s)
{
    if (s->cfg.webhook_url == NULL)
        return 0;
    const char *key = s->cfg.webhook_secret ? s->cfg.webhook_secret
                      : s->cfg.api_key      ? s->cfg.api_key
                                            : "";
    if (key[0] == '\0')
        log_warn("upstream webhooks are signed with an empty key (no --api-key)", "%s", "");
    s->wh = sim_webhook_new(s->cfg.webhook_url, key, s->cfg.webhook_retries,
                            s->cfg.webhook_timeout_ms);
    return s->wh != NULL ? 0 : -1;
}

/* Create the context (it listens), learn the port, hand the context to the model and write
 * the port file. Returns 0, or -1 after logging. */
static int start_listening(struct sim *s, const struct lws_context_creation_info *info, int port)
{
    s->ctx = lws_create_context(info);
    if (s->ctx == NULL) {
        log_err("cannot listen", "listen=%s", s->cfg.listen);
        return -1;
    }
    s->vh = lws_get_vhost_by_name(s->ctx, "default");
    s->port = s->vh ? lws_get_vhost_listen_port(s->vh) : port;
    sim_model_attach(s->model, s->ctx);
    if (s->cfg.port_file != NULL && write_port_file(s->cfg.port_file, s->port) != 0) {
        log_err("cannot write the port file", "path=%s", s->cfg.port_file);
        return -1;
    }
    return 0;
}

/* The start-up lines: where everything listens, and a warning beyond loopback. */
static void announce(const struct sim *s, const char *host)
{
    int loopback = strcmp(host, "127.0.0.1") == 0 || strcmp(host, "localhost") == 0 ||
                   strcmp(host, "::1") == 0 || strncmp(host, "127.", 4) == 0;
    if (!loopback)
        log_warn("listening beyond loopback: the control API has no authentication",
                 "listen=%s", s->cfg.listen);
    const char *shown = strchr(host, ':') ? "[::1]" : loopback ? host : "127.0.0.1";
    log_info("simulator listening",
             "port=%d ws=ws://%s:%d/ api=http://%s:%d control=http://%s:%d/_sim/ seed=%lld "
             "rate=%lld api_key=%s webhook=%s",
             s->port, shown, s->port, shown, s->port, shown, s->port, (long long)s->cfg.seed,
             (long long)s->cfg.rate, s->cfg.api_key ? "required" : "none",
             s->cfg.webhook_url ? s->cfg.webhook_url : "off");
}

/* Free everything sim_main made, in reverse order of creation. */
static void teardown(struct sim *s)
{
    sim_webhook_free(s->wh); /* first: it holds no pointer into the rest, but stops sending */
    s->wh = NULL;
    if (s->ctx != NULL) {
        lws_sul_cancel(&gen_sul);
        sim_ws_stop(s->ws);
        sim_model_free(s->model, 0);
        s->model = NULL;
        lws_context_destroy(s->ctx); /* closes every connection through the callbacks */
        s->ctx = NULL;
    }
    sim_model_free(s->model, 1);
    sim_ws_free(s->ws);
    sim_http_free(s->http);
    curl_global_cleanup();
    settings_free(sim_settings, &s->cfg);
    g_sim = NULL;
}

int sim_main(int argc, char **argv)
{
    struct sim *s = &the_sim;
    int rc = load_settings(s, argc, argv);
    if (rc >= 0)
        return rc;
    log_set_level(s->cfg.log_level);
    log_thread_name("sim");
    s->model = sim_model_new((uint64_t)s->cfg.seed, s->cfg.retain, on_change, s);
    for (size_t i = 0; i < sim_chain_count(); i++)
        s->chain_flags[i] = (unsigned char)sim_chain_default_flags(i);
    if (validate(s) != 0) {
        sim_model_free(s->model, 1);
        settings_free(sim_settings, &s->cfg);
        return EXIT_USAGE;
    }
    log_route_libs();

    char host[256];
    int port;
    parse_hostport(s->cfg.listen, host, sizeof(host), &port);
    s->faults.rate_limit = s->cfg.rate_limit;
    s->faults.envelope_b = s->cfg.envelope[0] == 'B';
    s->fault_rng = (uint64_t)s->cfg.seed * 0x2545f4914f6cdd1dULL + 77;
    s->started_mono_ms = mono_ms();
    s->ws = sim_ws_new(s);
    s->http = sim_http_new(s);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    struct lws_protocols protocols[3];
    struct lws_context_creation_info info;
    context_info(s, &info, protocols, host, port);
    install_signals(s);
    rc = 1;
    if (start_webhook(s) != 0 || start_listening(s, &info, port) != 0)
        goto out;
    announce(s, host);
    if (s->cfg.rate > 0 || s->cfg.exit_when_done)
        sim_load_set(s, s->cfg.rate, s->cfg.duration_ms);

    while (!s->stop)
        if (lws_service(s->ctx, 0) < 0)
            break;
    log_info("simulator stopping", "requests=%llu", (unsigned long long)s->stats.requests_created);
    rc = 0;
out:
    teardown(s);
    return rc;
}
