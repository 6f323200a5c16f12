/* ws_url.h - the upstream websocket URL: ws[s]://host[:port][/path][?query][#fragment].
 *
 * Pure: parses the configured URL into what the websocket client connects with (address,
 * port, TLS, the Host header, the request target) and what may be logged. The upstream API
 * key travels as the query parameter apiKey= (percent-encoded, appended to any query the URL
 * has); the target therefore holds a secret and is never logged: log_url is the URL without
 * its query. Userinfo (user@host) is refused, so a credential cannot hide there either.
 * runs on: any thread (no state). */
#ifndef PROTO_WS_URL_H
#define PROTO_WS_URL_H

struct proto_ws_url {
    int tls;        /* wss */
    int port;       /* 1..65535; 443 / 80 when the URL names none */
    char *address;  /* host name or IP literal (an IPv6 one without brackets) */
    char *host_hdr; /* the Host header: host, [v6], with :port unless it is the default */
    char *target;   /* path and query, apiKey=<key> appended when a key is given: secret */
    char *log_url;  /* scheme://host_hdr/path, no query, no fragment: safe to log */
};

/* Parse url; api_key NULL or "" adds none. Returns 0 (out owns four malloc'd strings:
 * proto_ws_url_cleanup), PROTO_EVALUE (not a ws/wss URL: no host, userinfo, a bad port, a
 * host over 253 bytes, an unclosed IPv6 bracket) or PROTO_ENOMEM; out is empty then. */
int proto_ws_url_parse(const char *url, const char *api_key, struct proto_ws_url *out);
/* Free out's strings and empty it. NULL-safe. */
void proto_ws_url_cleanup(struct proto_ws_url *u);

#endif
