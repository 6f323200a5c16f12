/* webhooks.c (cli) - the webhook commands: webhooks list|add|update|show|rm|rotate-secret|
 * reveal-secret|test|enable|disable, deliveries, replay. See internal.h; their options and
 * help pages are rows of the table in cli.c.
 * runs on: main thread. */
#include "relay/cli/internal.h"
#include "relay/commands.h"
#include "relay/common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rateLimit as "5/s", or "-" when none, into buf (24 bytes). */
static const char *rate_text(json_t *w, char *buf)
{
    json_t *r = json_object_get(w, "rateLimit");
    if (!json_is_integer(r))
        return "-";
    snprintf(buf, 24, "%lld/s", (long long)json_integer_value(r));
    return buf;
}

static void print_webhook_row(json_t *w)
{
    char rate[24];
    printf("%-26s %-8s %-9s %-7s %s%s%s\n", cli_str(w, "id"),
           json_is_true(json_object_get(w, "enabled")) ? "enabled" : "disabled",
           cli_str(w, "signatureScheme"), rate_text(w, rate), cli_str(w, "url"),
           json_string_length(json_object_get(w, "description")) ? "  # " : "",
           json_string_length(json_object_get(w, "description")) ? cli_str(w, "description")
                                                                  : "");
}

/* "/v1/webhooks/<id><tail>" with the id URL-escaped. */
static void wh_path(char *buf, size_t n, const char *id, const char *tail)
{
    char *e = url_escape(id);
    snprintf(buf, n, "/v1/webhooks/%s%s", e, tail);
    free(e);
}

int cli_wh_list(struct cli *c, const struct cli_args *a)
{
    json_t *out;
    long st = cli_call(c, "GET", "/v1/webhooks", NULL, &out, 0);
    if (st == 200 && c->json) {
        cli_print_json(out);
    } else if (st == 200) {
        printf("%-26s %-8s %-9s %-7s %s\n", "ID", "STATE", "SCHEME", "RATE", "URL");
        size_t i;
        json_t *w;
        json_array_foreach(json_object_get(out, "webhooks"), i, w) print_webhook_row(w);
    }
    json_decref(out);
    return cli_exit_for(st);
}

/* The filter options of add/update into *out, a filters object (NULL when none was given).
 * Returns 0, or EXIT_USAGE after naming a malformed --metadata. */
static int filters_from(const struct cli_args *a, json_t **out)
{
    static const struct {
        const char *opt, *key;
        int numbers;
    } map[] = {
        {"--status", "status", 0},
        {"--request-ids", "requestIds", 0},
        {"--origin-chains", "originChainIds", 1},
        {"--destination-chains", "destinationChainIds", 1},
        {"--events", "events", 0},
        {"--users", "users", 0},
        {"--referrers", "referrers", 0},
        {"--fail-reasons", "failReasons", 0},
        {"--refund-fail-reasons", "refundFailReasons", 0},
        {"--flags", "flags", 0},
    };
    json_t *f = NULL;
    *out = NULL;
    for (size_t i = 0; i < ARRAY_LEN(map); i++) {
        const char *v = cli_opt(a, map[i].opt);
        if (v == NULL)
            continue;
        if (f == NULL)
            f = json_object();
        json_object_set_new(f, map[i].key,
                            map[i].numbers ? cli_list_numbers(v) : cli_list_strings(v));
    }
    const char *meta = cli_opt(a, "--metadata");
    if (meta != NULL) {
        json_t *m = json_loads(meta, 0, NULL);
        if (!json_is_object(m)) {
            json_decref(m);
            json_decref(f);
            return cli_usage_error(a, "--metadata must be a JSON object, got '%s'", meta);
        }
        if (f == NULL)
            f = json_object();
        json_object_set_new(f, "metadata", m);
    }
    *out = f;
    return 0;
}

/* --rate-limit N|none into body["rateLimit"] (absent: untouched). Returns 0 or EXIT_USAGE. */
static int rate_limit_from(const struct cli_args *a, json_t *body)
{
    const char *v = cli_opt(a, "--rate-limit");
    if (v == NULL)
        return 0;
    if (strcmp(v, "none") == 0) {
        json_object_set_new(body, "rateLimit", json_null());
        return 0;
    }
    long n;
    if (cli_opt_int(a, "--rate-limit", 10000, &n) != 0)
        return EXIT_USAGE;
    json_object_set_new(body, "rateLimit", json_integer(n));
    return 0;
}

/* The --header NAME:VALUE options into *out (a headers object; NULL when none was given).
 * Returns 0 or EXIT_USAGE after naming a malformed one. */
static int headers_from(const struct cli_args *a, json_t **out)
{
    *out = NULL;
    int n = cli_opt_count(a, "--header");
    for (int i = 0; i < n; i++) {
        const char *h = cli_opt_at(a, "--header", i), *colon = strchr(h, ':');
        if (colon == NULL || colon == h) {
            json_decref(*out);
            *out = NULL;
            return cli_usage_error(a, "--header must be NAME:VALUE, got \"%s\"", h);
        }
        if (*out == NULL)
            *out = json_object();
        char *name = xstrndup(h, (size_t)(colon - h));
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        json_object_set_new(*out, name, json_string(v));
        free(name);
    }
    return 0;
}

int cli_wh_add(struct cli *c, const struct cli_args *a)
{
    json_t *headers, *filters, *out = NULL;
    if (filters_from(a, &filters) != 0)
        return EXIT_USAGE;
    if (headers_from(a, &headers) != 0) {
        json_decref(filters);
        return EXIT_USAGE;
    }
    json_t *body = json_pack("{s:s}", "url", a->pos[0]);
    json_object_set_new(body, "filters", filters ? filters : json_object());
    if (headers)
        json_object_set_new(body, "headers", headers);
    if (cli_opt(a, "--ed25519"))
        json_object_set_new(body, "signing", json_string("ed25519"));
    if (cli_opt(a, "--latest"))
        json_object_set_new(body, "mode", json_string("latest"));
    if (cli_opt(a, "--scheme"))
        json_object_set_new(body, "signatureScheme", json_string(cli_opt(a, "--scheme")));
    if (cli_opt(a, "--description"))
        json_object_set_new(body, "description", json_string(cli_opt(a, "--description")));
    if (rate_limit_from(a, body) != 0) {
        json_decref(body);
        return EXIT_USAGE;
    }
    long st = cli_call(c, "POST", "/v1/webhooks", body, &out, 0);
    if (st == 201 && c->json)
        cli_print_json(out);
    else if (st == 201)
        printf("id      %s\nurl     %s\n%s  %s\n", cli_str(out, "id"), cli_str(out, "url"),
               json_object_get(out, "publicKey") ? "pubkey" : "secret",
               json_object_get(out, "publicKey") ? cli_str(out, "publicKey")
                                                 : cli_str(out, "secret"));
    json_decref(body);
    json_decref(out);
    return cli_exit_for(st);
}

static void print_webhook(json_t *w)
{
    char *f = json_dumps(json_object_get(w, "filters"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *h = json_dumps(json_object_get(w, "headers"), JSON_COMPACT | JSON_PRESERVE_ORDER);
    char rate[24];
    printf("id           %s\nurl          %s\nstate        %s\nscheme       %s\nmode         "
           "%s\nrate limit   %s\nfilters      %s\nheaders      %s\ndescription  %s\n",
           cli_str(w, "id"), cli_str(w, "url"),
           json_is_true(json_object_get(w, "enabled")) ? "enabled" : "disabled",
           cli_str(w, "signatureScheme"), cli_str(w, "mode"), rate_text(w, rate),
           f ? f : "{}", h ? h : "{}", cli_str(w, "description"));
    free(f);
    free(h);
}

/* PATCH /v1/webhooks/{id} with body (consumed) and print the endpoint. */
static int patch(struct cli *c, const char *id, json_t *body)
{
    char path[1024];
    json_t *out;
    wh_path(path, sizeof(path), id, "");
    long st = cli_call(c, "PATCH", path, body, &out, 0);
    if (st == 200 && c->json)
        cli_print_json(out);
    else if (st == 200)
        print_webhook(out);
    json_decref(body);
    json_decref(out);
    return cli_exit_for(st);
}

int cli_wh_update(struct cli *c, const struct cli_args *a)
{
    if (cli_opt(a, "--enable") && cli_opt(a, "--disable"))
        return cli_usage_error(a, "give --enable or --disable, not both");
    json_t *filters, *headers;
    if (filters_from(a, &filters) != 0)
        return EXIT_USAGE;
    if (filters && cli_opt(a, "--no-filters")) {
        json_decref(filters);
        return cli_usage_error(a, "--no-filters and a filter option contradict each other");
    }
    if (headers_from(a, &headers) != 0) {
        json_decref(filters);
        return EXIT_USAGE;
    }
    if (headers && cli_opt(a, "--no-headers")) {
        json_decref(filters);
        json_decref(headers);
        return cli_usage_error(a, "--no-headers and --header contradict each other");
    }
    json_t *body = json_object();
    if (cli_opt(a, "--url"))
        json_object_set_new(body, "url", json_string(cli_opt(a, "--url")));
    if (cli_opt(a, "--enable") || cli_opt(a, "--disable"))
        json_object_set_new(body, "enabled", json_boolean(cli_opt(a, "--enable") != NULL));
    if (filters || cli_opt(a, "--no-filters"))
        json_object_set_new(body, "filters", filters ? filters : json_object());
    if (headers || cli_opt(a, "--no-headers"))
        json_object_set_new(body, "headers", headers ? headers : json_object());
    if (cli_opt(a, "--scheme"))
        json_object_set_new(body, "signatureScheme", json_string(cli_opt(a, "--scheme")));
    if (cli_opt(a, "--mode"))
        json_object_set_new(body, "mode", json_string(cli_opt(a, "--mode")));
    if (cli_opt(a, "--description"))
        json_object_set_new(body, "description", json_string(cli_opt(a, "--description")));
    if (rate_limit_from(a, body) != 0) {
        json_decref(body);
        return EXIT_USAGE;
    }
    if (json_object_size(body) == 0) {
        json_decref(body);
        return cli_usage_error(a, "nothing to change: give at least one option");
    }
    return patch(c, a->pos[0], body);
}

int cli_wh_enable(struct cli *c, const struct cli_args *a)
{
    return patch(c, a->pos[0], json_pack("{s:b}", "enabled", 1));
}

int cli_wh_disable(struct cli *c, const struct cli_args *a)
{
    return patch(c, a->pos[0], json_pack("{s:b}", "enabled", 0));
}

/* One call on /v1/webhooks/{id}<tail>; prints the answer as JSON (or `text` for an empty
 * one). */
static int simple(struct cli *c, const struct cli_args *a, const char *method, const char *tail,
                  const char *done)
{
    char path[1024];
    json_t *out;
    wh_path(path, sizeof(path), a->pos[0], tail);
    long st = cli_call(c, method, path, NULL, &out, 0);
    if (st >= 200 && st < 300) {
        if (out && (c->json || done == NULL))
            cli_print_json(out);
        else if (done)
            printf("%s %s\n", done, a->pos[0]);
    }
    json_decref(out);
    return cli_exit_for(st);
}

int cli_wh_show(struct cli *c, const struct cli_args *a)
{
    char path[1024];
    json_t *out;
    wh_path(path, sizeof(path), a->pos[0], "");
    long st = cli_call(c, "GET", path, NULL, &out, 0);
    if (st == 200 && c->json)
        cli_print_json(out);
    else if (st == 200)
        print_webhook(out);
    json_decref(out);
    return cli_exit_for(st);
}

int cli_wh_rm(struct cli *c, const struct cli_args *a)
{
    return simple(c, a, "DELETE", "", "deleted");
}

int cli_wh_rotate(struct cli *c, const struct cli_args *a)
{
    char path[1024];
    json_t *out;
    wh_path(path, sizeof(path), a->pos[0], "/rotate-secret");
    long st = cli_call(c, "POST", path, NULL, &out, 0);
    if (st == 200 && c->json) {
        cli_print_json(out);
    } else if (st == 200) {
        char t[32];
        cli_fmt_time(cli_num(out, "previousSecretExpiresAt"), t, sizeof(t));
        printf("%s  %s\nold secret signs too until %s\n",
               json_object_get(out, "publicKey") ? "pubkey" : "secret",
               json_object_get(out, "publicKey") ? cli_str(out, "publicKey")
                                                 : cli_str(out, "secret"),
               t);
    }
    json_decref(out);
    return cli_exit_for(st);
}

int cli_wh_reveal(struct cli *c, const struct cli_args *a)
{
    return simple(c, a, "POST", "/reveal-secret", NULL);
}

int cli_wh_test(struct cli *c, const struct cli_args *a)
{
    return simple(c, a, "POST", "/test", NULL);
}

/* ---- deliveries ------------------------------------------------------------------------ */

int cli_deliveries(struct cli *c, const struct cli_args *a)
{
    long limit;
    if (cli_opt_int(a, "--limit", 1000000, &limit) != 0)
        return EXIT_USAGE;
    char lim[24], base[1024];
    snprintf(lim, sizeof(lim), "%ld", limit);
    wh_path(base, sizeof(base), a->pos[0], "/deliveries");
    char *path = cli_path_query(base, "state", cli_opt(a, "--state"), "limit",
                                limit ? lim : NULL, "cursor", cli_opt(a, "--cursor"), NULL);
    json_t *out;
    long st = cli_call(c, "GET", path, NULL, &out, 0);
    free(path);
    if (st == 200 && c->json) {
        cli_print_json(out);
    } else if (st == 200) {
        printf("%-40s %-10s %-10s %-8s %s\n", "DELIVERY", "STATE", "STATUS", "ATTEMPTS",
               "LAST");
        size_t i;
        json_t *d;
        json_array_foreach(json_object_get(out, "deliveries"), i, d)
        {
            json_t *att = json_object_get(d, "attempts");
            json_t *last = json_array_get(att, json_array_size(att) - 1);
            char lastbuf[64] = "-";
            if (last)
                snprintf(lastbuf, sizeof(lastbuf), "%lld %s", cli_num(last, "statusCode"),
                         cli_str(last, "error"));
            printf("%-40s %-10s %-10s %-8zu %s\n", cli_str(d, "id"), cli_str(d, "state"),
                   cli_str(d, "status"), json_array_size(att), lastbuf);
        }
        json_t *cur = json_object_get(out, "cursor");
        if (json_is_string(cur))
            printf("next page: statusrelay deliveries %s --cursor %s\n", a->pos[0],
                   json_string_value(cur));
    }
    json_decref(out);
    return cli_exit_for(st);
}

/* ---- replay ---------------------------------------------------------------------------- */

/* Option name as unix ms into body[key]. Returns 0 or EXIT_USAGE. */
static int take_ms(const struct cli_args *a, const char *name, json_t *body, const char *key)
{
    const char *v = cli_opt(a, name);
    if (v == NULL)
        return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0')
        return cli_usage_error(a, "%s must be unix milliseconds, got \"%s\"", name, v);
    json_object_set_new(body, key, json_integer(n));
    return 0;
}

int cli_replay(struct cli *c, const struct cli_args *a)
{
    json_t *body = json_object(), *out;
    if (take_ms(a, "--since", body, "since") != 0 || take_ms(a, "--until", body, "until") != 0) {
        json_decref(body);
        return EXIT_USAGE;
    }
    if (cli_opt(a, "--dead"))
        json_object_set_new(body, "dead", json_true());
    if (cli_opt(a, "--dry-run"))
        json_object_set_new(body, "dryRun", json_true());
    if (cli_opt(a, "--request"))
        json_object_set_new(body, "requestId", json_string(cli_opt(a, "--request")));
    if (cli_opt(a, "--webhook"))
        json_object_set_new(body, "webhookId", json_string(cli_opt(a, "--webhook")));
    long st = cli_call(c, "POST", "/v1/replay", body, &out, 0);
    if (st >= 200 && st < 300 && c->json)
        cli_print_json(out);
    else if (st >= 200 && st < 300)
        printf("%s %lld delivery(ies)%s%s\n",
               json_is_true(json_object_get(body, "dryRun")) ? "would replay" : "replaying",
               cli_num(out, "count"), json_object_get(out, "replayId") ? " replay=" : "",
               json_object_get(out, "replayId") ? cli_str(out, "replayId") : "");
    json_decref(body);
    json_decref(out);
    return cli_exit_for(st);
}
