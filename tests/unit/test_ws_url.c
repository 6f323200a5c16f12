/* test_ws_url.c - protocol/ws_url.c: the upstream websocket URL as the client connects
 * with it (address, port, TLS, Host header, target with the key) and as it may be logged. */
#include "proto_test.h"
#include "protocol/proto.h"
#include "protocol/ws_url.h"

static void ok(const char *url, const char *key, int tls, int port, const char *address,
               const char *host_hdr, const char *target, const char *log_url)
{
    struct proto_ws_url w;
    assert_int_equal(proto_ws_url_parse(url, key, &w), 0);
    assert_int_equal(w.tls, tls);
    assert_int_equal(w.port, port);
    assert_string_equal(w.address, address);
    assert_string_equal(w.host_hdr, host_hdr);
    assert_string_equal(w.target, target);
    assert_string_equal(w.log_url, log_url);
    proto_ws_url_cleanup(&w);
    assert_null(w.address);
}

static void test_parts(void **state)
{
    (void)state;
    ok("wss://api.example.com/intents/ws", "s3cr t+/", 1, 443, "api.example.com",
       "api.example.com", "/intents/ws?apiKey=s3cr%20t%2B%2F", "wss://api.example.com/intents/ws");
    ok("ws://127.0.0.1:9000", NULL, 0, 9000, "127.0.0.1", "127.0.0.1:9000", "/",
       "ws://127.0.0.1:9000/");
    ok("WS://h:80/p?x=1#frag", "k", 0, 80, "h", "h", "/p?x=1&apiKey=k", "ws://h/p");
    ok("ws://h/p?", "k", 0, 80, "h", "h", "/p?apiKey=k", "ws://h/p");
    ok("wss://[::1]:8443/ws", "", 1, 8443, "::1", "[::1]:8443", "/ws", "wss://[::1]:8443/ws");
    ok("wss://[::1]", NULL, 1, 443, "::1", "[::1]", "/", "wss://[::1]/");
    ok("ws://h?q=1", "k", 0, 80, "h", "h", "/?q=1&apiKey=k", "ws://h/");
}

static void test_refused(void **state)
{
    static const char *const bad[] = {
        "http://h/",   "ws://",         "ws:///p",        "ws://user:pw@h/", "ws://h:/",
        "ws://h:0",    "ws://h:65536",  "ws://h:99999999999", "ws://h:8x",   "ws://[::1",
        "ws://[::1]x", "ws://:80",      "wss://[]/",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct proto_ws_url w;
        assert_int_equal(proto_ws_url_parse(bad[i], "k", &w), PROTO_EVALUE);
        assert_null(w.target);
    }
    char host[300] = "ws://";
    memset(host + 5, 'a', 254);
    host[259] = '\0';
    struct proto_ws_url w;
    assert_int_equal(proto_ws_url_parse(host, NULL, &w), PROTO_EVALUE); /* 254-byte host */
    host[258] = '\0';
    assert_int_equal(proto_ws_url_parse(host, NULL, &w), 0); /* 253 */
    proto_ws_url_cleanup(&w);
    proto_ws_url_cleanup(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
