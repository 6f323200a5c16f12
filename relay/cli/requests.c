/* requests.c (cli) - the request commands: track, untrack, status, find, requests, events,
 * tail.
 * See internal.h; their options and help pages are rows of the table in cli.c.
 *
 * Explorer links (status): GET /v1/chains serves the upstream's chain list
 * ({"chains": [{id, name, displayName?, explorerUrl, explorerPaths?: {transaction}, disabled?,
 * blockProductionLagging?}]}). A link is explorerUrl + explorerPaths.transaction with
 * "{TX_HASH}" replaced by the hash (a path without the placeholder gets the hash appended),
 * or explorerUrl + "/tx/" + hash when the chain has no transaction path. In hashes are on the
 * origin chain; out hashes on the destination chain, except a refund's (sent back on the
 * origin chain). Without the list (404, 503, unreachable) the hashes print without links.
 * runs on: main thread. */
#include "relay/cli/internal.h"
#include "relay/commands.h"
#include "relay/common/util.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- track / untrack ------------------------------------------------------------------ */

int cli_track(struct cli *c, const struct cli_args *a)
{
    json_t *ids = json_array();
    for (int i = 0; i < a->npos; i++)
        json_array_append_new(ids, json_string(a->pos[i]));
    json_t *body = json_pack("{s:o}", "requestIds", ids), *out;
    const char *meta = cli_opt(a, "--metadata");
    if (meta != NULL) {
        json_t *m = json_loads(meta, 0, NULL);
        if (!json_is_object(m)) {
            json_decref(m);
            json_decref(body);
            return cli_usage_error(a, "--metadata must be a JSON object, got '%s'", meta);
        }
        json_object_set_new(body, "metadata", m);
    }
    long st = cli_call(c, "POST", "/v1/requests", body, &out, 0);
    if (st >= 200 && st < 300) {
        if (c->json)
            cli_print_json(out);
        else
            printf("tracking %d request(s) (%lld newly)\n", a->npos, cli_num(out, "created"));
    }
    json_decref(body);
    json_decref(out);
    return cli_exit_for(st);
}

int cli_untrack(struct cli *c, const struct cli_args *a)
{
    int rc = 0;
    json_t *list = json_array();
    for (int i = 0; i < a->npos; i++) {
        char *id = url_escape(a->pos[i]), path[1024];
        snprintf(path, sizeof(path), "/v1/requests/%s", id);
        free(id);
        json_t *out;
        long st = cli_call(c, "DELETE", path, NULL, &out, 0);
        json_decref(out);
        int r = cli_exit_for(st);
        if (r != 0 && (rc == 0 || r == 1)) /* a failure outranks a not-found */
            rc = r;
        if (c->json)
            json_array_append_new(list, json_pack("{s:s,s:b}", "requestId", a->pos[i],
                                                  "untracked", st >= 200 && st < 300));
        else if (st >= 200 && st < 300)
            printf("untracked %s\n", a->pos[i]);
    }
    if (c->json) {
        json_t *o = json_pack("{s:O}", "requests", list);
        cli_print_json(o);
        json_decref(o);
    }
    json_decref(list);
    return rc;
}

/* ---- status ---------------------------------------------------------------------------- */

/* The chain object of id from a GET /v1/chains body, NULL when unknown. */
static json_t *chain_of(json_t *chains, long long id)
{
    size_t i;
    json_t *ch;
    json_array_foreach(json_object_get(chains, "chains"), i, ch)
    {
        json_t *v = json_object_get(ch, "id");
        if (json_is_number(v) && (long long)json_number_value(v) == id)
            return ch;
    }
    return NULL;
}

/* The explorer link of hash on chain ch (see the top of the file); NULL without one. */
static char *tx_link(json_t *ch, const char *hash)
{
    const char *base = json_string_value(json_object_get(ch, "explorerUrl"));
    if (base == NULL || base[0] == '\0')
        return NULL;
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--;
    const char *tpl =
        json_string_value(json_object_get(json_object_get(ch, "explorerPaths"), "transaction"));
    if (tpl == NULL || tpl[0] == '\0')
        return xasprintf("%.*s/tx/%s", (int)bl, base, hash);
    const char *at = strstr(tpl, "{TX_HASH}");
    const char *slash = tpl[0] == '/' ? "" : "/";
    if (at == NULL)
        return xasprintf("%.*s%s%s%s", (int)bl, base, slash, tpl, hash);
    return xasprintf("%.*s%s%.*s%s%s", (int)bl, base, slash, (int)(at - tpl), tpl, hash,
                     at + strlen("{TX_HASH}"));
}

/* "Base (8453)" or "8453"; marks a chain the list calls disabled or lagging. */
static void chain_label(json_t *chains, json_t *idv, char *buf, size_t n)
{
    if (!json_is_number(idv)) {
        snprintf(buf, n, "-");
        return;
    }
    long long id = (long long)json_number_value(idv);
    json_t *ch = chain_of(chains, id);
    const char *nm = json_string_value(json_object_get(ch, "displayName"));
    if (nm == NULL)
        nm = json_string_value(json_object_get(ch, "name"));
    int off = json_is_true(json_object_get(ch, "disabled")),
        lag = json_is_true(json_object_get(ch, "blockProductionLagging"));
    if (nm)
        snprintf(buf, n, "%s (%lld)%s%s", nm, id, off ? " [disabled]" : "",
                 lag ? " [block production lagging]" : "");
    else
        snprintf(buf, n, "%lld", id);
}

static void print_hashes(const char *label, json_t *hashes, json_t *ch)
{
    size_t i;
    json_t *h;
    if (json_array_size(hashes) == 0) {
        printf("%-10s -\n", label);
        return;
    }
    json_array_foreach(hashes, i, h)
    {
        if (!json_is_string(h))
            continue;
        char *link = ch ? tx_link(ch, json_string_value(h)) : NULL;
        printf("%-10s %s%s%s\n", i == 0 ? label : "", json_string_value(h), link ? "  " : "",
               link ? link : "");
        free(link);
    }
}

/* "in 23h59m" / "3m ago" for a time relative to now. */
static void fmt_rel(long long ms, char *buf, size_t n)
{
    long long d = ms - wall_ms();
    long long s = (d < 0 ? -d : d) / 1000;
    char t[32];
    if (s >= 86400)
        snprintf(t, sizeof(t), "%lldd%lldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(t, sizeof(t), "%lldh%lldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(t, sizeof(t), "%lldm%llds", s / 60, s % 60);
    else
        snprintf(t, sizeof(t), "%llds", s);
    snprintf(buf, n, d >= 0 ? "in %s" : "%s ago", t);
}

static void print_watch(json_t *state)
{
    const char *phase = cli_str(state, "watch");
    json_t *until = json_object_get(state, "watchUntil");
    static const struct {
        const char *phase, *what;
    } means[] = {
        {"active", "subscribed upstream and polled"},
        {"settled", "still subscribed, polled slowly for reversals"},
        {"ended", "not followed any more (the last state stays readable)"},
    };
    const char *what = "";
    for (size_t i = 0; i < ARRAY_LEN(means); i++)
        if (strcmp(phase, means[i].phase) == 0)
            what = means[i].what;
    if (json_is_number(until)) {
        char t[32], rel[48];
        cli_fmt_time((long long)json_number_value(until), t, sizeof(t));
        fmt_rel((long long)json_number_value(until), rel, sizeof(rel));
        printf("watch      %s until %s (%s): %s\n", phase, t, rel, what);
    } else {
        printf("watch      %s%s%s\n", phase, strcmp(phase, "ended") ? " (no end): " : ": ", what);
    }
}

/* The deposit address: null for a normal request, else the upstream's object {address,
 * depositAddressType, depositor, depositTxHash} (depositTxHash on the origin chain). */
static void print_deposit(json_t *dep, json_t *origin)
{
    if (json_is_string(dep)) {
        printf("deposit    %s\n", json_string_value(dep));
        return;
    }
    if (!json_is_object(dep)) {
        printf("deposit    -\n");
        return;
    }
    const char *type = json_string_value(json_object_get(dep, "depositAddressType")),
               *who = json_string_value(json_object_get(dep, "depositor")),
               *tx = json_string_value(json_object_get(dep, "depositTxHash"));
    printf("deposit    %s%s%s%s\n", cli_str(dep, "address"), type ? " (" : "", type ? type : "",
           type ? ")" : "");
    if (who)
        printf("depositor  %s\n", who);
    if (tx) {
        char *link = origin ? tx_link(origin, tx) : NULL;
        printf("deposit tx %s%s%s\n", tx, link ? "  " : "", link ? link : "");
        free(link);
    }
}

static void print_status(json_t *state, json_t *events, json_t *chains)
{
    char t[32], from[128], to[128];
    cli_fmt_time(cli_num(state, "updatedAt"), t, sizeof(t));
    chain_label(chains, json_object_get(state, "originChainId"), from, sizeof(from));
    chain_label(chains, json_object_get(state, "destinationChainId"), to, sizeof(to));
    json_t *st = json_object_get(state, "status");
    printf("request    %s\nstatus     %s\nupdated    %s\nseq        %lld\nchains     %s -> %s\n",
           cli_str(state, "requestId"), json_is_string(st) ? json_string_value(st)
                                                           : "(not observed yet)",
           t, cli_num(state, "seq"), from, to);
    json_t *oc = NULL, *dc = NULL;
    if (json_is_number(json_object_get(state, "originChainId")))
        oc = chain_of(chains, cli_num(state, "originChainId"));
    if (json_is_number(json_object_get(state, "destinationChainId")))
        dc = chain_of(chains, cli_num(state, "destinationChainId"));
    print_deposit(json_object_get(state, "depositAddress"), oc);
    int refund = json_is_string(st) && strcmp(json_string_value(st), "refund") == 0;
    print_hashes("in tx", json_object_get(state, "inTxHashes"), oc);
    print_hashes("out tx", json_object_get(state, "txHashes"), refund ? oc : dc);
    print_watch(state);
    printf("fail       %s / refund %s\n", cli_str(state, "failReason"),
           cli_str(state, "refundFailReason"));
    json_t *meta = json_object_get(state, "metadata");
    if (json_is_object(meta)) {
        char *m = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("metadata   %s\n", m ? m : "-");
        free(m);
    }
    if (events == NULL) /* find: no timeline */
        return;
    printf("\n%-5s %-12s %-12s %-9s %s\n", "SEQ", "STATUS", "PREVIOUS", "SOURCE", "AT");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(events, "events"), i, e)
    {
        cli_fmt_time(cli_num(e, "createdAt"), t, sizeof(t));
        printf("%-5lld %-12s %-12s %-9s %s\n", cli_num(e, "seq"), cli_str(e, "status"),
               cli_str(e, "previousStatus"), cli_str(e, "source"), t);
    }
}

int cli_status(struct cli *c, const struct cli_args *a)
{
    char *id = url_escape(a->pos[0]);
    char path[1024];
    json_t *state, *events = NULL, *chains = NULL;
    snprintf(path, sizeof(path), "/v1/requests/%s", id);
    long st = cli_call(c, "GET", path, NULL, &state, 0);
    if (st == 200) {
        snprintf(path, sizeof(path), "/v1/events?requestId=%s&limit=1000", id);
        long st2 = cli_call(c, "GET", path, NULL, &events, 0);
        if (st2 != 200)
            st = st2;
    }
    if (st == 200 && c->json) {
        json_object_set(state, "events", json_object_get(events, "events"));
        cli_print_json(state);
    } else if (st == 200) {
        /* optional: without the chain list the hashes print without links */
        if (cli_call(c, "GET", "/v1/chains", NULL, &chains, 1) != 200) {
            json_decref(chains);
            chains = NULL;
        }
        print_status(state, events, chains);
    }
    free(id);
    json_decref(state);
    json_decref(events);
    json_decref(chains);
    return cli_exit_for(st);
}

/* ---- find ------------------------------------------------------------------------------ */

/* The facts of a request (GET /v1/requests/{id} "request", DESIGN "Request facts"): wallets,
 * creation time, referrer and the transactions with their explorer links. */
static void print_facts(json_t *facts)
{
    if (!json_is_object(facts)) {
        printf("facts      - (not known yet)\n");
        return;
    }
    static const char *const wallets[] = {"user", "sender", "recipient", "referrer"};
    for (size_t i = 0; i < ARRAY_LEN(wallets); i++)
        if (json_is_string(json_object_get(facts, wallets[i])))
            printf("%-10s %s\n", wallets[i], cli_str(facts, wallets[i]));
    json_t *ca = json_object_get(facts, "createdAt");
    if (json_is_number(ca)) {
        char t[32];
        cli_fmt_time((long long)json_number_value(ca), t, sizeof(t));
        printf("created    %s\n", t);
    }
    static const char *const lists[] = {"inTxs", "outTxs"};
    for (size_t l = 0; l < ARRAY_LEN(lists); l++) {
        size_t i;
        json_t *tx;
        json_array_foreach(json_object_get(facts, lists[l]), i, tx)
        {
            json_t *url = json_object_get(tx, "explorerUrl");
            printf("%-10s %s (chain %lld)%s%s\n", i == 0 ? lists[l] : "", cli_str(tx, "txHash"),
                   cli_num(tx, "chainId"), json_is_string(url) ? "  " : "",
                   json_is_string(url) ? json_string_value(url) : "");
        }
    }
}

int cli_find(struct cli *c, const struct cli_args *a)
{
    char *path = cli_path_query("/v1/requests", "q", a->pos[0], "limit", "50", NULL);
    json_t *page, *chains = NULL;
    long st = cli_call(c, "GET", path, NULL, &page, 0);
    free(path);
    json_t *found = json_array();
    size_t i;
    json_t *r;
    if (st == 200)
        json_array_foreach(json_object_get(page, "requests"), i, r)
        {
            /* the full record: facts and all */
            char *id = url_escape(cli_str(r, "requestId"));
            char one[1024];
            snprintf(one, sizeof(one), "/v1/requests/%s", id);
            free(id);
            json_t *full;
            if (cli_call(c, "GET", one, NULL, &full, 1) == 200)
                json_array_append_new(found, full);
            else {
                json_decref(full);
                json_array_append(found, r);
            }
        }
    if (st == 200 && c->json) {
        json_t *o = json_pack("{s:O}", "requests", found);
        cli_print_json(o);
        json_decref(o);
    } else if (st == 200) {
        if (cli_call(c, "GET", "/v1/chains", NULL, &chains, 1) != 200) {
            json_decref(chains);
            chains = NULL;
        }
        json_array_foreach(found, i, r)
        {
            if (i > 0)
                printf("\n");
            print_status(r, NULL, chains);
            print_facts(json_object_get(r, "request"));
        }
        if (json_is_string(json_object_get(page, "cursor")))
            printf("\nmore requests match: the first 50 are shown; narrow the term\n");
        if (json_array_size(found) == 0)
            fprintf(stderr, "statusrelay find: nothing found for %s\n", a->pos[0]);
    }
    int rc = st == 200 && json_array_size(found) == 0 ? EXIT_NOTFOUND : cli_exit_for(st);
    json_decref(found);
    json_decref(page);
    json_decref(chains);
    return rc;
}

/* ---- requests -------------------------------------------------------------------------- */

static void print_request_row(json_t *r)
{
    char t[32], watch[64];
    cli_fmt_time(cli_num(r, "updatedAt"), t, sizeof(t));
    json_t *st = json_object_get(r, "status");
    snprintf(watch, sizeof(watch), "%s", cli_str(r, "watch"));
    printf("%-66s %-10s %-20s %10lld -> %-10lld %s\n", cli_str(r, "requestId"),
           json_is_string(st) ? json_string_value(st) : "-", t, cli_num(r, "originChainId"),
           cli_num(r, "destinationChainId"), watch);
}

int cli_requests(struct cli *c, const struct cli_args *a)
{
    long limit;
    if (cli_opt_int(a, "--limit", 500, &limit) != 0)
        return EXIT_USAGE;
    char lim[24];
    snprintf(lim, sizeof(lim), "%ld", limit);
    const char *cursor = cli_opt(a, "--cursor");
    int all = cli_opt(a, "--all") != NULL;
    json_t *merged = json_array(), *next = NULL;
    char *cur = cursor ? xstrdup(cursor) : NULL;
    long st;
    int header = 0;
    for (;;) {
        char *path = cli_path_query("/v1/requests", "status", cli_opt(a, "--status"), "stuck",
                                    cli_opt(a, "--stuck") ? "true" : NULL, "limit",
                                    limit ? lim : NULL, "cursor", cur, NULL);
        json_t *out;
        st = cli_call(c, "GET", path, NULL, &out, 0);
        free(path);
        free(cur);
        cur = NULL;
        if (st != 200) {
            json_decref(out);
            break;
        }
        json_array_extend(merged, json_object_get(out, "requests"));
        if (!c->json) {
            if (!header++)
                printf("%-66s %-10s %-20s %-24s %s\n", "REQUEST", "STATUS", "UPDATED",
                       "ORIGIN -> DESTINATION", "WATCH");
            size_t i;
            json_t *r;
            json_array_foreach(json_object_get(out, "requests"), i, r) print_request_row(r);
            fflush(stdout);
        }
        json_t *nc = json_object_get(out, "cursor");
        json_decref(next);
        next = json_is_string(nc) ? json_incref(nc) : NULL;
        json_decref(out);
        if (!all || next == NULL)
            break;
        cur = xstrdup(json_string_value(next));
    }
    if (st == 200 && c->json) {
        json_t *o = json_pack("{s:O,s:O}", "requests", merged, "cursor", next ? next : json_null());
        cli_print_json(o);
        json_decref(o);
    } else if (st == 200) {
        printf("%zu request(s)\n", json_array_size(merged));
        if (next)
            printf("next page: statusrelay requests --cursor %s\n", json_string_value(next));
    }
    json_decref(merged);
    json_decref(next);
    return cli_exit_for(st);
}

/* ---- events ---------------------------------------------------------------------------- */

/* --since as a unix ms time: digits are ms, "2026-08-01T12:00:00Z" a UTC time, "15m" that
 * long ago. Returns 0 or -1. */
static int parse_since(const char *s, long long *out)
{
    char *end;
    if (s[0] >= '0' && s[0] <= '9') {
        long long v = strtoll(s, &end, 10);
        if (*end == '\0') {
            *out = v;
            return 0;
        }
    }
    struct tm tm = {0};
    int y, mo, d, h = 0, mi = 0, sec = 0;
    char z = 0;
    int n = sscanf(s, "%d-%d-%dT%d:%d:%d%c", &y, &mo, &d, &h, &mi, &sec, &z);
    if ((n == 3 && strlen(s) == 10) || ((n == 6 || (n == 7 && z == 'Z')) && strlen(s) <= 20)) {
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        *out = (long long)timegm(&tm) * 1000;
        return 0;
    }
    int64_t ago;
    if (parse_duration_ms(s, &ago) == 0) {
        *out = wall_ms() - ago;
        return 0;
    }
    return -1;
}

static void print_event_row(json_t *e)
{
    char t[32];
    cli_fmt_time(cli_num(e, "createdAt"), t, sizeof(t));
    printf("%s %-12s <- %-12s seq=%-3lld %-8s %s\n", t, cli_str(e, "status"),
           cli_str(e, "previousStatus"), cli_num(e, "seq"), cli_str(e, "source"),
           cli_str(e, "requestId"));
}

int cli_events(struct cli *c, const struct cli_args *a)
{
    long limit;
    if (cli_opt_int(a, "--limit", 1000, &limit) != 0)
        return EXIT_USAGE;
    const char *since = cli_opt(a, "--since"), *after = cli_opt(a, "--after");
    char lim[24], ms[32];
    snprintf(lim, sizeof(lim), "%ld", limit);
    if (since && after)
        return cli_usage_error(a, "give --since or --after, not both");
    if (since) {
        long long v;
        if (parse_since(since, &v) != 0)
            return cli_usage_error(a, "--since must be unix ms, an ISO time or a duration "
                                      "like 15m, got \"%s\"", since);
        snprintf(ms, sizeof(ms), "%lld", v);
        after = ms;
    }
    char *path = cli_path_query("/v1/events", "after", after, "requestId",
                                cli_opt(a, "--request"), "limit", limit ? lim : NULL, NULL);
    json_t *out;
    long st = cli_call(c, "GET", path, NULL, &out, 0);
    free(path);
    if (st == 200 && c->json) {
        cli_print_json(out);
    } else if (st == 200) {
        size_t i;
        json_t *e, *list = json_object_get(out, "events");
        json_array_foreach(list, i, e) print_event_row(e);
        json_t *cur = json_object_get(out, "cursor");
        printf("%zu event(s)", json_array_size(list));
        if (json_is_string(cur))
            printf("; continue with --after %s", json_string_value(cur));
        printf("\n");
    }
    json_decref(out);
    return cli_exit_for(st);
}

/* ---- tail ------------------------------------------------------------------------------ */

static volatile sig_atomic_t stop_tail;
static void on_sigint(int sig)
{
    stop_tail = 1;
}

int cli_tail(struct cli *c, const struct cli_args *a)
{
    const char *rid = cli_opt(a, "--request"), *status = cli_opt(a, "--status");
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    char after[128] = "$"; /* "$" = from now on */
    int first = 1;
    while (!stop_tail) {
        char *path = cli_path_query("/v1/events", "limit", "500", "after", after, "requestId",
                                    rid, NULL);
        json_t *out;
        long st = cli_call(c, "GET", path, NULL, &out, 0);
        free(path);
        if (st != 200) {
            json_decref(out);
            return cli_exit_for(st);
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(out, "events"), i, e)
        {
            if (!first && (status == NULL || strcmp(status, cli_str(e, "status")) == 0)) {
                if (c->json)
                    cli_print_json_line(e);
                else
                    print_event_row(e);
            }
            snprintf(after, sizeof(after), "%s", cli_str(e, "streamId"));
        }
        json_t *cur = json_object_get(out, "cursor");
        if (json_is_string(cur))
            snprintf(after, sizeof(after), "%s", json_string_value(cur));
        first = 0;
        fflush(stdout);
        json_decref(out);
        usleep(300 * 1000);
    }
    return 0;
}
