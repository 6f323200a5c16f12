/* ws_http.c - plain HTTP on the dashboard port (ws_internal.h): the embedded page files, GET
 * /chains.json, and the Host rule that refuses requests not naming the relay (page, chain list
 * and websocket upgrade) against DNS rebinding. runs on: ws thread. */
#include "relay/edge/ws_internal.h"
#include "protocol/addr.h"
#include "relay/common/cors.h"
#include "relay/common/embedded.h"
#include "relay/common/log.h"
#include "relay/common/util.h"
#include "relay/edge/ws_listen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* DNS rebinding: a page of a name resolving to 127.0.0.1 is "same-origin" with us (its
 * Origin and Host match), which would let it load broad subscriptions without a token. When
 * no stream token is configured, every request (page, /chains.json, upgrade) must name us:
 * a loopback Host in any spelling or a STATUSRELAY_ALLOWED_HOSTS name. No Host at all is not
 * a browser. 1 when the request is refused. */
int ws_http_host_refused(const struct ws_server *s, struct lws *wsi)
{
    char host[300];
    if (!s->host_check || lws_hdr_total_length(wsi, WSI_TOKEN_HOST) <= 0)
        return 0;
    if (lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST) <= 0)
        return 1; /* longer than any name */
    return !proto_host_names_relay(host, s->allowed_hosts);
}

void ws_http_log_refused_host(struct ws_server *s, struct lws *wsi, const char *what)
{
    struct log_limit *ll = &s->host_log;
    char host[64] = "";
    int64_t now = mono_ms();
    if (now - ll->last_ms < 1000) { /* one line a second at most */
        ll->quiet++;
        return;
    }
    lws_hdr_copy(wsi, host, sizeof(host), WSI_TOKEN_HOST);
    for (char *p = host; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e || *p == '"')
            *p = '?';
    log_info("dashboard request with a foreign Host refused", "what=%s host=\"%s\" "
             "suppressed=%llu", what, host, (unsigned long long)ll->quiet);
    ll->last_ms = now;
    ll->quiet = 0;
}


/* ---- client addresses ------------------------------------------------------------------ */

/* A header's whole value (lws joins repeated lines with ','), or NULL; *len its length. */
static char *hdr_value(struct lws *wsi, enum lws_token_indexes tok, const char *custom,
                       size_t *len)
{
    int n = custom != NULL ? lws_hdr_custom_length(wsi, custom, (int)strlen(custom))
                           : lws_hdr_total_length(wsi, tok);
    *len = 0;
    if (n <= 0)
        return NULL;
    char *v = xmalloc((size_t)n + 1);
    int got = custom != NULL ? lws_hdr_custom_copy(wsi, v, n + 1, custom, (int)strlen(custom))
                             : lws_hdr_copy(wsi, v, n + 1, tok);
    if (got < 0) {
        free(v);
        return NULL;
    }
    *len = (size_t)got;
    return v;
}

int ws_http_client(struct ws_server *s, struct lws *wsi, struct proto_ip *out, int *proxied)
{
    struct log_limit *ll = &s->fwd_log;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = lws_get_socket_fd(wsi);
    *proxied = 0;
    memset(out, 0, sizeof(*out));
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 ||
        proto_ip_from_sockaddr((struct sockaddr *)&ss, out) != 0)
        return -1;
    if (!proto_cidr_list_match(&s->trusted, out))
        return 0;
    *proxied = 1;
    struct proto_ip peer = *out;
    size_t xl = 0, fl = 0;
    char *xff = hdr_value(wsi, WSI_TOKEN_X_FORWARDED_FOR, NULL, &xl);
    char *fwd = hdr_value(wsi, WSI_TOKEN_HOST, "forwarded:", &fl);
    enum proto_fwd_result r = proto_forwarded_client(xff, xl, fwd, fl, &s->trusted, out);
    free(xff);
    free(fwd);
    if (r == PROTO_FWD_OK)
        return 0;
    *out = peer;
    if (r == PROTO_FWD_BAD) {
        int64_t now = mono_ms();
        if (ll->last_ms != 0 && now - ll->last_ms < 10000) {
            ll->quiet++;
        } else {
            char p[64];
            proto_ip_format(&peer, p, sizeof(p));
            log_warn("malformed forwarded header from a trusted proxy: its own address is used",
                     "listener=ws proxy=%s suppressed=%llu", p, (unsigned long long)ll->quiet);
            ll->last_ms = now;
            ll->quiet = 0;
        }
    }
    return 0;
}

/* ---- plain HTTP ------------------------------------------------------------------------ */

static const char *mime_of(const char *path)
{
    static const struct {
        const char *ext, *type;
    } t[] = {{".html", "text/html; charset=utf-8"},
             {".js", "text/javascript; charset=utf-8"},
             {".css", "text/css; charset=utf-8"},
             {".svg", "image/svg+xml"},
             {".png", "image/png"},
             {".ico", "image/x-icon"},
             {".json", "application/json"}};
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot != NULL && i < ARRAY_LEN(t); i++)
        if (strcmp(dot, t[i].ext) == 0)
            return t[i].type;
    return "application/octet-stream";
}

static const struct embedded_file *page_file(const char *uri)
{
    char path[128];
    if (strcmp(uri, "/") == 0 || strcmp(uri, "/index.html") == 0)
        return embedded_find("relay/www/index.html");
    if (uri[0] != '/' || strchr(uri + 1, '/') != NULL || strstr(uri, "..") != NULL ||
        strlen(uri) > 64)
        return NULL;
    snprintf(path, sizeof(path), "relay/www/%s", uri + 1);
    return embedded_find(path);
}

static int header(struct lws *wsi, const char *name, const char *value, unsigned char **p,
                  unsigned char *end)
{
    return lws_add_http_header_by_name(wsi, (const unsigned char *)name,
                                       (const unsigned char *)value, (int)strlen(value), p, end);
}

/* Access-Control-Allow-Origin (and Vary) for a request from an allowed Origin; 0 or lws's
 * nonzero on a full header buffer. */
static int cors_header(struct ws_server *s, struct lws *wsi, unsigned char **p, unsigned char *end)
{
    char origin[256];
    if (s->cors_origins == NULL ||
        lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN) <= 0)
        return 0;
    const char *acao = cors_allow_origin(s->cors_origins, origin);
    if (acao == NULL)
        return 0;
    return header(wsi, "access-control-allow-origin:", acao, p, end) ||
           (strcmp(acao, "*") != 0 && header(wsi, "vary:", "Origin", p, end));
}

/* Answer with b (taken) as the whole body, type application/json. */
static int send_json_blob(struct lws *wsi, struct session *x, unsigned status, struct xbuf *b)
{
    unsigned char buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start,
                                      *end = buf + sizeof(buf) - 1;
    if (lws_add_http_common_headers(wsi, status, "application/json", b->len, &p, end) ||
        header(wsi, "cache-control:", "no-cache", &p, end) ||
        header(wsi, "x-content-type-options:", "nosniff", &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end)) {
        xbuf_unref(b);
        return 1;
    }
    xbuf_unref(x->blob);
    x->blob = b;
    x->file = NULL;
    x->file_off = 0;
    lws_callback_on_writable(wsi);
    return 0;
}

/* GET /chains.json: the chain list the core handed over (relay/ingest/chains.c), or 503 with
 * a JSON error until there is one. Public data (the upstream's own list): no token. */
static int on_chains_json(struct ws_server *s, struct lws *wsi, struct session *x)
{
    static const char none[] = "{\"error\":{\"code\":\"chains_unavailable\",\"message\":"
                               "\"the upstream chain list has not been fetched yet\"},"
                               "\"message\":\"the upstream chain list has not been fetched "
                               "yet\",\"errorCode\":\"CHAINS_UNAVAILABLE\"}";
    if (s->chains != NULL)
        return send_json_blob(wsi, x, HTTP_STATUS_OK, xbuf_ref(s->chains));
    return send_json_blob(wsi, x, HTTP_STATUS_SERVICE_UNAVAILABLE,
                          xbuf_new(none, sizeof(none) - 1));
}

/* 403 forbidden_host, the REST port's error shape. */
static int on_foreign_host(struct ws_server *s, struct lws *wsi, struct session *x)
{
    static const char body[] =
        "{\"error\":{\"code\":\"forbidden_host\",\"message\":\"this Host is not this relay "
        "(STATUSRELAY_ALLOWED_HOSTS adds names)\"},\"message\":\"this Host is not this relay "
        "(STATUSRELAY_ALLOWED_HOSTS adds names)\",\"errorCode\":\"FORBIDDEN_HOST\"}";
    ws_http_log_refused_host(s, wsi, "http");
    return send_json_blob(wsi, x, HTTP_STATUS_FORBIDDEN, xbuf_new(body, sizeof(body) - 1));
}

int ws_http_client_over_cap(struct ws_server *s, struct lws *wsi)
{
    struct proto_ip client;
    int proxied = 0;
    char key[PROTO_IP_KEY_MAX];
    if (ws_http_client(s, wsi, &client, &proxied) != 0 || !proxied ||
        proto_cidr_list_match(&s->trusted, &client))
        return 0;
    proto_ip_key(&client, key, sizeof(key));
    return ws_listen_count_client(wsi, key) != 0;
}

int ws_http_on_request(struct ws_server *s, struct lws *wsi, struct session *x, const char *uri)
{
    count(&s->st.http_requests);
    if (ws_http_host_refused(s, wsi))
        return on_foreign_host(s, wsi, x);
    if (ws_http_client_over_cap(s, wsi)) {
        if (lws_return_http_status(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, NULL))
            return -1;
        return -1; /* the connection goes: its client holds enough */
    }
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 && strcmp(uri, "/chains.json") == 0)
        return on_chains_json(s, wsi, x);
    const struct embedded_file *f =
        lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0 ? page_file(uri) : NULL;
    if (f != NULL) {
        unsigned char buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start,
                                           *end = buf + sizeof(buf) - 1;
        if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, mime_of(f->path), f->len, &p,
                                        end) ||
            header(wsi, "cache-control:", "no-cache", &p, end) ||
            header(wsi, "x-content-type-options:", "nosniff", &p, end) ||
            header(wsi, "referrer-policy:", "no-referrer", &p, end) ||
            header(wsi, "x-frame-options:", "DENY", &p, end) || cors_header(s, wsi, &p, end) ||
            header(wsi, "content-security-policy:",
                   "default-src 'self'; connect-src 'self' ws: wss:; "
                   "img-src 'self' data: https:; " /* chain icons: the upstream's URLs */
                   "style-src 'self'; script-src 'self'; frame-ancestors 'none'",
                   &p, end) ||
            lws_finalize_write_http_header(wsi, start, &p, end))
            return 1;
        x->file = f;
        x->file_off = 0;
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL))
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

int ws_http_on_writeable(struct lws *wsi, struct session *x)
{
    if (x->file == NULL && x->blob == NULL)
        return 0;
    const unsigned char *data = x->file ? (const unsigned char *)x->file->data : x->blob->data;
    size_t len = x->file ? x->file->len : x->blob->len;
    unsigned char buf[LWS_PRE + HTTP_CHUNK];
    size_t left = len - x->file_off, n = left < HTTP_CHUNK ? left : HTTP_CHUNK;
    int final = n == left;
    memcpy(buf + LWS_PRE, data + x->file_off, n);
    x->file_off += n;
    if (lws_write(wsi, buf + LWS_PRE, n, final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) !=
        (int)n)
        return -1;
    if (!final) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    x->file = NULL;
    xbuf_unref(x->blob);
    x->blob = NULL;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}
