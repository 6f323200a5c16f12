/* test_relay_admit.c - unit tests for relay/api/admit.c: one row per rule of admission, on the
 * daemon's own route table (routes.c) - the verdict, the body cap the gate applies, the
 * status-read anonymity, the allowed methods and the route's parameters. No network.
 * runs on: the test process, one thread. */
#include "relay/api/admit.h"
#include "protocol/addr.h"

#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <cmocka.h>

/* The settings of the rows: no token (the API open on loopback), a token (and a read token)
 * with the pass-through and an admin CORS origin, a token (and a read token) that the status
 * reads need too, the pass-through alone. */
enum rules_id { OPEN, TOKEN, REQUIRE, PASS };

static struct admit_rules rules_of(enum rules_id id)
{
    struct admit_rules r = {api_routes, api_routes_len, NULL, "relay.example", "*", NULL, 0, 0,
                            NULL, {0}, {0}};
    if (id == TOKEN || id == REQUIRE) {
        r.admin_token = "sekret";
        r.read_token = "reader";
        r.admin_cors_origins = "https://admin.example";
        r.passthrough = id == TOKEN;
        r.status_require_token = id == REQUIRE;
    }
    if (id == PASS) {
        r.passthrough = 1;
        r.admin_cors_origins = "https://admin.example";
    }
    admit_rules_keys(&r);
    return r;
}

#define CT "Content-Type: application/json; charset=utf-8\n"
#define AUTH "Authorization: Bearer sekret\n"
#define RD "Authorization: Bearer reader\n"
#define LO "127.0.0.1"
#define ANY -2 /* the row does not check it */

static const struct row {
    enum rules_id rules;
    enum evhttp_cmd_type m;
    const char *path;    /* NULL: the target did not parse */
    const char *headers; /* "Name: value\n" lines */
    const char *client;  /* address literal, or NULL (unknown) */
    enum admit_verdict want;
    int64_t cap;   /* -1, 0 for API_BODY_ANON_MAX, 1 for API_BODY_MAX */
    int anonymous; /* or ANY */
} rows[] = {
    /* open on loopback: Host must name us */
    {OPEN, EVHTTP_REQ_GET, "/healthz", "Host: 127.0.0.1:8080\n", LO, ADMIT_GO, 0, 0},
    {OPEN, EVHTTP_REQ_HEAD, "/healthz", "Host: localhost\n", LO, ADMIT_GO, 0, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "Host: localhost:8080\n", LO, ADMIT_GO, 1, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "Host: relay.example\n", LO, ADMIT_GO, 1, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "", LO, ADMIT_GO, 1, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "Host: evil.example\n", LO, ADMIT_FORBIDDEN_HOST, -1,
     0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "Host: 127.0.0.1\nHost: 127.0.0.1\n", LO,
     ADMIT_FORBIDDEN_HOST, -1, 0},
    {OPEN, EVHTTP_REQ_GET, "/healthz", "Host: evil.example\n", LO, ADMIT_FORBIDDEN_HOST, -1, 0},
    /* cross-site: state changes need an allowed Origin and a JSON body type */
    {OPEN, EVHTTP_REQ_POST, "/v1/requests", CT, LO, ADMIT_GO, 1, 0},
    {OPEN, EVHTTP_REQ_POST, "/v1/requests", "Content-Type: text/plain\n", LO, ADMIT_MEDIA_TYPE,
     -1, 0},
    {OPEN, EVHTTP_REQ_POST, "/v1/requests", "", LO, ADMIT_MEDIA_TYPE, -1, 0},
    {OPEN, EVHTTP_REQ_POST, "/v1/requests", CT "Origin: https://evil.example\n", LO,
     ADMIT_FORBIDDEN_ORIGIN, -1, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests", "Origin: https://evil.example\n", LO, ADMIT_GO, 1, 0},
    {OPEN, EVHTTP_REQ_DELETE, "/v1/requests/abc", "Origin: https://evil.example\n", LO,
     ADMIT_FORBIDDEN_ORIGIN, -1, 0},
    {OPEN, EVHTTP_REQ_POST, "/v1/ingest/upstream", "Content-Type: text/plain\n", NULL, ADMIT_GO,
     0, 0},
    /* routing */
    {OPEN, EVHTTP_REQ_DELETE, "/v1/requests", "", LO, ADMIT_METHOD, -1, 0},
    {OPEN, EVHTTP_REQ_GET, "/nope", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {OPEN, EVHTTP_REQ_GET, "/v1/requests/a/b/c", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {OPEN, EVHTTP_REQ_GET, NULL, "", LO, ADMIT_NOT_FOUND, -1, 0},
    {OPEN, EVHTTP_REQ_OPTIONS, "/intents/status/v3", "Origin: https://a.example\n", NULL,
     ADMIT_OPTIONS, -1, ANY},
    {OPEN, EVHTTP_REQ_OPTIONS, "/v1/requests", "", LO, ADMIT_METHOD, -1, 0},
    /* status reads: anonymous unless proven (loopback without Origin, or the token) */
    {OPEN, EVHTTP_REQ_GET, "/intents/status/v3", "", LO, ADMIT_GO, 0, 0},
    {OPEN, EVHTTP_REQ_GET, "/intents/status", "", "::1", ADMIT_GO, 0, 0},
    {OPEN, EVHTTP_REQ_GET, "/intents/status/v3", "Origin: https://a.example\n", LO, ADMIT_GO, 0,
     1},
    {OPEN, EVHTTP_REQ_GET, "/intents/status/v3", "", "10.0.0.1", ADMIT_GO, 0, 1},
    {OPEN, EVHTTP_REQ_GET, "/intents/status/v3", "", NULL, ADMIT_GO, 0, 1},
    {TOKEN, EVHTTP_REQ_GET, "/intents/status/v3", "", LO, ADMIT_GO, 0, 1},
    {TOKEN, EVHTTP_REQ_GET, "/intents/status/v3", AUTH, "10.0.0.1", ADMIT_GO, 0, 0},
    {REQUIRE, EVHTTP_REQ_GET, "/intents/status/v3", "", LO, ADMIT_UNAUTHORIZED, -1, 1},
    {REQUIRE, EVHTTP_REQ_GET, "/intents/status/v3", AUTH, LO, ADMIT_GO, 0, 0},
    /* the admin token */
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "", LO, ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", AUTH, LO, ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "Authorization: bearer   sekret \n", LO, ADMIT_GO, 1,
     0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "Authorization: Bearer sekre\n", LO,
     ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "Authorization: sekret\n", LO, ADMIT_UNAUTHORIZED,
     -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", AUTH "Host: evil.example\n", LO, ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/healthz", "", LO, ADMIT_GO, 0, 0},
    {TOKEN, EVHTTP_REQ_GET, "/metrics", "", LO, ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/requests", "Content-Type: text/plain\n", LO,
     ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/requests", AUTH "Content-Type: text/plain\n", LO,
     ADMIT_MEDIA_TYPE, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks", AUTH CT "Origin: https://admin.example\n", LO,
     ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks", AUTH CT "Origin: https://evil.example\n", LO,
     ADMIT_FORBIDDEN_ORIGIN, -1, 0},
    {TOKEN, EVHTTP_REQ_OPTIONS, "/v1/webhooks", "Origin: https://admin.example\n", LO,
     ADMIT_OPTIONS, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/nope", "", LO, ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/nope", AUTH, LO, ADMIT_NOT_FOUND, -1, 0},
    /* the read token: GET/HEAD on every token route, anything else 403 (before the media
     * type and the route: it is valid); it proves a status-read caller */
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", RD, LO, ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_HEAD, "/v1/webhooks", RD, LO, ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/metrics", "Authorization: BEARER  reader\t\n", LO, ADMIT_GO, 1,
     0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/webhooks/x/deliveries", RD, LO, ADMIT_GO, 1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/nope", RD, LO, ADMIT_NOT_FOUND, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "Authorization: Bearer readerx\n", LO,
     ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_GET, "/v1/requests", "Authorization: Bearer reade\n", LO,
     ADMIT_UNAUTHORIZED, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks", RD, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_PATCH, "/v1/webhooks/x", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_DELETE, "/v1/webhooks/x", RD, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks/x/reveal-secret", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks/x/rotate-secret", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/replay", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/backfill", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/requests", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_DELETE, "/v1/requests/abc", RD, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_PUT, "/v1/webhooks/x", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/nope", RD CT, LO, ADMIT_READ_ONLY, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/webhooks", RD CT "Origin: https://evil.example\n", LO,
     ADMIT_FORBIDDEN_ORIGIN, -1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/v1/ingest/upstream", RD "Content-Type: text/plain\n", NULL,
     ADMIT_GO, 0, 0},
    {TOKEN, EVHTTP_REQ_GET, "/intents/status/v3", RD, "10.0.0.1", ADMIT_GO, 0, 0},
    {REQUIRE, EVHTTP_REQ_GET, "/intents/status/v3", RD, LO, ADMIT_GO, 0, 0},
    {TOKEN, EVHTTP_REQ_POST, "/quote", RD, LO, ADMIT_PROXY, 0, 0},
    /* the pass-through: 64 KiB unless the admin token is set and presented */
    {TOKEN, EVHTTP_REQ_POST, "/quote", "", LO, ADMIT_PROXY, 0, 0},
    {TOKEN, EVHTTP_REQ_POST, "/quote", AUTH, LO, ADMIT_PROXY, 1, 0},
    {TOKEN, EVHTTP_REQ_POST, "/quote", "Authorization: Bearer other\n", LO, ADMIT_PROXY, 0, 0},
    {PASS, EVHTTP_REQ_GET, "/quote", "Host: evil.example\n", LO, ADMIT_PROXY, 0, 0},
    {PASS, EVHTTP_REQ_GET, "/", "", LO, ADMIT_PROXY, 0, 0},
    {PASS, EVHTTP_REQ_GET, NULL, "", LO, ADMIT_PROXY, 0, 0},
    {PASS, EVHTTP_REQ_GET, "/V1/x", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {PASS, EVHTTP_REQ_GET, "/v1", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {PASS, EVHTTP_REQ_GET, "/intents/statusX", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {PASS, EVHTTP_REQ_GET, "/%76%31/x", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {PASS, EVHTTP_REQ_GET, "/%6D%65trics/", "", LO, ADMIT_GO, 1, 0},
    {PASS, EVHTTP_REQ_GET, "/metrics/x", "", LO, ADMIT_PROXY, 0, 0},
    {PASS, EVHTTP_REQ_GET, "/a%00b", "", LO, ADMIT_NOT_FOUND, -1, 0},
    {OPEN, EVHTTP_REQ_GET, "/quote", "", LO, ADMIT_NOT_FOUND, -1, 0},
};

static void set_headers(struct evkeyvalq *in, const char *lines)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", lines);
    for (char *l = buf, *nl; l != NULL && *l != '\0'; l = nl) {
        nl = strchr(l, '\n');
        if (nl != NULL)
            *nl++ = '\0';
        char *colon = strchr(l, ':');
        assert_non_null(colon);
        *colon = '\0';
        evhttp_add_header(in, l, colon + 2);
    }
}

static void set_client(struct proto_ip *ip, const char *addr)
{
    memset(ip, 0, sizeof(*ip));
    if (addr == NULL)
        return;
    ip->family = strchr(addr, ':') != NULL ? AF_INET6 : AF_INET;
    assert_int_equal(inet_pton(ip->family, addr, ip->a), 1);
}

static void test_rows(void **state)
{
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *w = &rows[i];
        struct admit_rules r = rules_of(w->rules);
        struct evkeyvalq in;
        TAILQ_INIT(&in);
        set_headers(&in, w->headers);
        struct proto_ip ip;
        set_client(&ip, w->client);
        struct admit_req q = {w->m, w->path, &in, w->client != NULL ? &ip : NULL};
        struct admit ad;
        admit_decide(&r, &q, &ad);
        int64_t cap = w->cap < 0 ? -1 : w->cap ? API_BODY_MAX : API_BODY_ANON_MAX;
        if (ad.verdict != w->want || ad.body_cap != cap ||
            (w->anonymous != ANY && ad.anonymous != w->anonymous))
            fail_msg("row %zu (%s %s): verdict %d cap %lld anonymous %d, want %d %lld %d", i,
                     w->path ? w->path : "(none)", w->headers, (int)ad.verdict,
                     (long long)ad.body_cap, ad.anonymous, (int)w->want, (long long)cap,
                     w->anonymous);
        assert_true(ad.verdict != ADMIT_GO || ad.route != NULL);
        admit_cleanup(&ad);
        evhttp_clear_headers(&in);
    }
}

/* The route, its parameters (decoded, NULs kept), the methods of the path, CORS. */
static void test_route_details(void **state)
{
    struct admit_rules r = rules_of(OPEN);
    struct evkeyvalq in;
    TAILQ_INIT(&in);
    struct admit_req q = {EVHTTP_REQ_GET, "/v1/webhooks/a%2Fb%00c/deliveries", &in, NULL};
    struct admit ad;
    admit_decide(&r, &q, &ad);
    assert_int_equal(ad.verdict, ADMIT_GO);
    assert_string_equal(ad.route->pattern, "/v1/webhooks/{}/deliveries");
    assert_int_equal(ad.param_len[0], 5);
    assert_memory_equal(ad.param[0], "a/b\0c", 5);
    assert_null(ad.param[1]);
    admit_cleanup(&ad);
    assert_null(ad.param[0]);

    q = (struct admit_req){EVHTTP_REQ_PUT, "/v1/webhooks/x", &in, NULL};
    admit_decide(&r, &q, &ad);
    assert_int_equal(ad.verdict, ADMIT_METHOD);
    assert_null(ad.route);
    assert_null(ad.param[0]);
    char list[96];
    admit_allow_list(ad.allow, ad.cors_on, list, sizeof(list));
    assert_string_equal(list, "GET, HEAD, PATCH, DELETE");
    admit_allow_list(ad.allow, 1, list, sizeof(list));
    assert_string_equal(list, "GET, HEAD, PATCH, DELETE, OPTIONS");

    set_headers(&in, "Origin: https://a.example\n");
    q = (struct admit_req){EVHTTP_REQ_GET, "/intents/status/v3", &in, NULL};
    admit_decide(&r, &q, &ad);
    assert_true(ad.read_path && ad.cors_on);
    assert_string_equal(ad.acao, "*");
    assert_string_equal(ad.origin, "https://a.example");
    q.path = "/v1/requests";
    admit_decide(&r, &q, &ad);
    assert_true(!ad.read_path && !ad.cors_on);
    assert_null(ad.acao);
    evhttp_clear_headers(&in);
}

/* Which token a value presents: both compared, blanks trimmed, nothing without a setting. */
static void test_tokens(void **state)
{
    struct admit_rules r = rules_of(TOKEN), open = rules_of(OPEN);
    assert_int_equal(admit_token(&r, "sekret", 6), ADMIT_CRED_ADMIN);
    assert_int_equal(admit_token(&r, " reader\t", 8), ADMIT_CRED_READ);
    assert_int_equal(admit_token(&r, "readerX", 6), ADMIT_CRED_READ); /* n bytes only */
    assert_int_equal(admit_token(&r, "sekre", 5), ADMIT_CRED_NONE);
    assert_int_equal(admit_token(&r, "", 0), ADMIT_CRED_NONE);
    assert_int_equal(admit_token(&r, "   ", 3), ADMIT_CRED_NONE);
    assert_int_equal(admit_token(&open, "", 0), ADMIT_CRED_NONE);
    assert_int_equal(admit_token(&open, "sekret", 6), ADMIT_CRED_NONE);
    r.admin_token = "";
    admit_rules_keys(&r);
    assert_int_equal(admit_token(&r, "", 0), ADMIT_CRED_NONE);
    assert_int_equal(admit_token(&r, "reader", 6), ADMIT_CRED_READ);
    assert_int_equal(admit_token(&r, "sekret", 6), ADMIT_CRED_NONE);
    r = rules_of(TOKEN);
    r.read_token = "other-reader"; /* keys not set again: the old digest, never the new one */
    assert_int_equal(admit_token(&r, "other-reader", 12), ADMIT_CRED_NONE);
    struct admit_rules unkeyed = {api_routes, api_routes_len, "sekret", NULL, "*", NULL, 0, 0,
                                  "reader", {0}, {0}};
    assert_int_equal(admit_token(&unkeyed, "sekret", 6), ADMIT_CRED_NONE); /* fails closed */
    assert_int_equal(admit_token(&unkeyed, "reader", 6), ADMIT_CRED_NONE);
    r = rules_of(TOKEN);
    assert_int_equal(admit_bearer(&r, "Bearer reader", 13), ADMIT_CRED_READ);
    assert_int_equal(admit_bearer(&r, "bearer sekret ", 14), ADMIT_CRED_ADMIN);
    assert_int_equal(admit_bearer(&r, "Basic reader", 12), ADMIT_CRED_NONE);
    assert_int_equal(admit_bearer(&r, "reader", 6), ADMIT_CRED_NONE);
    assert_int_equal(admit_bearer(&r, "Bearer", 6), ADMIT_CRED_NONE);
    assert_int_equal(admit_bearer(&r, NULL, 0), ADMIT_CRED_NONE);
}

static void test_method_names(void **state)
{
    assert_int_equal(admit_method("GET", 3), EVHTTP_REQ_GET);
    assert_int_equal(admit_method("PATCH", 5), EVHTTP_REQ_PATCH);
    assert_int_equal(admit_method("OPTIONS", 7), EVHTTP_REQ_OPTIONS);
    assert_int_equal(admit_method("GETX", 3), EVHTTP_REQ_GET);
    assert_int_equal(admit_method("get", 3), 0);
    assert_int_equal(admit_method("TRACE", 5), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_route_details),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_method_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
