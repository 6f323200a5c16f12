/* admit.c (api) - see admit.h: the route loop, Host, Origin, token and media-type checks of a
 * request head, in one place. Pure (no I/O, no clock). runs on: core thread. */
#include "relay/api/admit.h"
#include "protocol/addr.h"
#include "protocol/rest_req.h"
#include "relay/common/cors.h"
#include "relay/common/util.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Method names, in the order an Allow header lists them. */
static const struct {
    enum evhttp_cmd_type m;
    const char *name;
} method_names[] = {
    {EVHTTP_REQ_GET, "GET"},         {EVHTTP_REQ_HEAD, "HEAD"},   {EVHTTP_REQ_POST, "POST"},
    {EVHTTP_REQ_PUT, "PUT"},         {EVHTTP_REQ_PATCH, "PATCH"}, {EVHTTP_REQ_DELETE, "DELETE"},
    {EVHTTP_REQ_OPTIONS, "OPTIONS"},
};

void admit_allow_list(unsigned allow, int options, char *list, size_t n)
{
    list[0] = '\0';
    for (size_t i = 0; i < ARRAY_LEN(method_names); i++)
        if ((allow & method_names[i].m) ||
            (method_names[i].m == EVHTTP_REQ_HEAD && (allow & EVHTTP_REQ_GET)) ||
            (method_names[i].m == EVHTTP_REQ_OPTIONS && options)) {
            if (list[0] != '\0')
                strncat(list, ", ", n - strlen(list) - 1);
            strncat(list, method_names[i].name, n - strlen(list) - 1);
        }
}

enum evhttp_cmd_type admit_method(const char *m, size_t n)
{
    for (size_t i = 0; i < ARRAY_LEN(method_names); i++)
        if (strlen(method_names[i].name) == n && memcmp(method_names[i].name, m, n) == 0)
            return method_names[i].m;
    return 0;
}

static int has_token(const struct admit_rules *r)
{
    return r->admin_token != NULL && r->admin_token[0] != '\0';
}

static int has_read_token(const struct admit_rules *r)
{
    return r->read_token != NULL && r->read_token[0] != '\0';
}

/* SHA-256 of the n bytes of s into md (a failure is out of memory: a digest left unset could
 * match another, so it aborts). */
static void digest(const char *s, size_t n, unsigned char md[SHA256_DIGEST_LENGTH])
{
    if (EVP_Digest(s, n, md, NULL, EVP_sha256(), NULL) != 1)
        abort();
}

void admit_rules_keys(struct admit_rules *r)
{
    _Static_assert(sizeof(r->admin_md) == SHA256_DIGEST_LENGTH, "a SHA-256 digest");
    memset(r->admin_md, 0, sizeof(r->admin_md));
    memset(r->read_md, 0, sizeof(r->read_md));
    if (has_token(r))
        digest(r->admin_token, strlen(r->admin_token), r->admin_md);
    if (has_read_token(r))
        digest(r->read_token, strlen(r->read_token), r->read_md);
}

enum admit_cred admit_token(const struct admit_rules *r, const char *tok, size_t n)
{
    while (n > 0 && (*tok == ' ' || *tok == '\t'))
        tok++, n--;
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
        n--;
    /* digests: equal lengths for CRYPTO_memcmp whatever the lengths of the tokens, and both
     * compared every time (no early return on the first match) */
    unsigned char got[SHA256_DIGEST_LENGTH];
    int ha = has_token(r), hr = has_read_token(r);
    digest(tok, n, got);
    int is_admin = (CRYPTO_memcmp(got, r->admin_md, sizeof(got)) == 0) & ha & (n > 0);
    int is_read = (CRYPTO_memcmp(got, r->read_md, sizeof(got)) == 0) & hr & (n > 0);
    return is_admin ? ADMIT_CRED_ADMIN : is_read ? ADMIT_CRED_READ : ADMIT_CRED_NONE;
}

enum admit_cred admit_bearer(const struct admit_rules *r, const char *v, size_t n)
{
    if (v == NULL || n < 7 || strncasecmp(v, "Bearer ", 7) != 0)
        return ADMIT_CRED_NONE;
    return admit_token(r, v + 7, n - 7);
}

/* The token the request's Authorization header presents. */
static enum admit_cred request_cred(const struct admit_rules *r, struct evkeyvalq *in)
{
    const char *h = evhttp_find_header(in, "Authorization");
    return h == NULL ? ADMIT_CRED_NONE : admit_bearer(r, h, strlen(h));
}

/* 1 when no admin token is set (the API is open), or the request presented the admin token
 * or the read token (admit_token). What the read token may do is judge's. */
static int authorized(const struct admit_rules *r, const struct admit *out)
{
    return !has_token(r) || out->cred != ADMIT_CRED_NONE;
}

/* A status-read caller proved who it is (issue 22; otherwise it is anonymous, compat.c): with
 * an admin token set, by presenting it or the read token; without one, by being a tool on this
 * machine - a loopback client whose request carries no Origin (any web page can make a browser
 * send a GET to loopback, but not without its Origin). Behind a trusted proxy (a local nginx: a
 * loopback peer) the client is the forwarded one, which is on loopback only when the proxy says
 * so. */
static int read_caller_proven(const struct admit_rules *r, const struct admit_req *q,
                              const struct admit *out)
{
    const char *origin = out->origin;
    if (has_token(r))
        return authorized(r, out);
    static const uint8_t lo6[16] = {[15] = 1};
    const struct proto_ip *ip = q->client;
    int loopback = ip != NULL && ((ip->family == AF_INET && ip->a[0] == 127) ||
                                  (ip->family == AF_INET6 && memcmp(ip->a, lo6, 16) == 0));
    return origin == NULL && loopback;
}

/* DNS rebinding: a page of a name that resolves to 127.0.0.1 is "same-origin" with us and
 * could read every answer. Without an admin token (the API is open on loopback), a request
 * must name us: a loopback Host (any spelling proto_listen_is_loopback takes, any port) or a
 * name in STATUSRELAY_ALLOWED_HOSTS. With a token, the token protects. */
static int host_allowed(const struct admit_rules *r, const char *host)
{
    if (has_token(r) || host == NULL)
        return 1;
    return proto_host_names_relay(host, r->allowed_hosts);
}

/* The request's Host, or a value no Host rule accepts when it has several (ambiguous: which
 * one did a proxy in front check?); NULL when it has none. */
static const char *request_host(struct evkeyvalq *in)
{
    static const char several[] = "(several Host headers)";
    const char *host = NULL;
    for (struct evkeyval *kv = TAILQ_FIRST(in); kv != NULL; kv = TAILQ_NEXT(kv, next))
        if (strcasecmp(kv->key, "Host") == 0) {
            if (host != NULL)
                return several;
            host = kv->value;
        }
    return host;
}

/* 1 when a Content-Type value is application/json (any case, parameters allowed). */
static int json_media_type(const char *ct)
{
    static const char want[] = "application/json";
    if (ct == NULL)
        return 0;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, sizeof(want) - 1) != 0)
        return 0;
    ct += sizeof(want) - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/* Does the pass-through forward path (raw, as received)? Never our own namespaces (/v1 and
 * below, /intents/status*, /healthz, /readyz, /metrics), compared percent-decoded and
 * case-insensitively, nor a path with a decoded NUL byte (refused here). */
static int proxy_wants(const struct admit_rules *r, const char *path)
{
    if (!r->passthrough)
        return 0;
    if (path == NULL || path[0] == '\0')
        path = "/";
    size_t n = 0;
    char *d = evhttp_uridecode(path, 0, &n);
    if (d == NULL)
        return 0;
    size_t l = strlen(d);
    int ours = l != n; /* a decoded NUL byte: refused here, not forwarded */
    while (l > 1 && d[l - 1] == '/')
        l--;
    static const char *const exact[] = {"/healthz", "/readyz", "/metrics", "/v1"};
    for (size_t i = 0; i < ARRAY_LEN(exact) && !ours; i++)
        ours = l == strlen(exact[i]) && strncasecmp(d, exact[i], l) == 0;
    if (!ours)
        ours = strncasecmp(d, "/v1/", 4) == 0 || strncasecmp(d, "/intents/status", 15) == 0;
    free(d);
    return !ours;
}

/* The route loop: every row whose pattern matches the path adds its method to out->allow; the
 * first whose method matches too is out->route (its parameters copied out). *auth: the auth of
 * that route, else of the last matching row that needs no token. -1 when the path does not
 * parse (or is NULL), else 0. */
static int route(const struct admit_rules *r, const char *path, enum evhttp_cmd_type m,
                 struct admit *out, enum route_auth *auth)
{
    if (path == NULL)
        return -1;
    struct proto_rest_seg segs[PROTO_REST_SEGS_MAX];
    size_t plen = strlen(path);
    char *segbuf = xmalloc(plen + 1);
    int nsegs = proto_rest_path_split(path, plen, segbuf, plen + 1, segs, PROTO_REST_SEGS_MAX);
    for (size_t i = 0; nsegs >= 0 && i < r->nroutes; i++) {
        const struct route *rt = &r->routes[i];
        if (!proto_rest_route_match(rt->pattern, segs, nsegs, NULL, ROUTE_MAX_PARAMS))
            continue;
        out->allow |= rt->method;
        out->read_path |= rt->auth == AUTH_READ;
        if (rt->auth != AUTH_TOKEN)
            *auth = rt->auth;
        if (out->route == NULL && rt->method == m)
            out->route = rt;
    }
    if (out->route != NULL) {
        *auth = out->route->auth;
        int pi[ROUTE_MAX_PARAMS] = {-1, -1};
        proto_rest_route_match(out->route->pattern, segs, nsegs, pi, ROUTE_MAX_PARAMS);
        for (int i = 0; i < ROUTE_MAX_PARAMS; i++)
            if (pi[i] >= 0) { /* the decoded bytes, NULs included (param_len is the truth) */
                out->param[i] = xmalloc(segs[pi[i]].len + 1);
                memcpy(out->param[i], segs[pi[i]].s, segs[pi[i]].len);
                out->param[i][segs[pi[i]].len] = '\0';
                out->param_len[i] = segs[pi[i]].len;
            }
    }
    free(segbuf);
    return nsegs < 0 ? -1 : 0;
}

/* The verdict on a routed request (rules 2-8 of admit.h). */
static enum admit_verdict judge(const struct admit_rules *r, const struct admit_req *q,
                                enum evhttp_cmd_type m, enum route_auth auth, struct admit *out)
{
    const struct route *rt = out->route;
    int unknown = out->allow == 0;
    struct evkeyvalq *in = q->headers;
    if (m == EVHTTP_REQ_OPTIONS && rt == NULL && !unknown && out->cors_on)
        return ADMIT_OPTIONS;
    if (!host_allowed(r, out->host))
        return ADMIT_FORBIDDEN_HOST;
    /* Cross-site requests (issue 15): a browser page can send a "simple" POST to us without a
     * preflight, so a state-changing request must come from an allowed Origin (none by
     * default; STATUSRELAY_ADMIN_CORS_ORIGINS) and carry a JSON body type, which a page can
     * only send after a preflight we refuse. Clients that are not browsers send no Origin. */
    if (rt != NULL && rt->auth == AUTH_TOKEN && m != EVHTTP_REQ_GET && out->origin != NULL &&
        out->acao == NULL)
        return ADMIT_FORBIDDEN_ORIGIN;
    if ((auth == AUTH_TOKEN || (auth == AUTH_READ && r->status_require_token)) &&
        !authorized(r, out))
        return ADMIT_UNAUTHORIZED;
    /* The read token reads: on a token route (or an unknown path) anything but GET/HEAD is
     * refused, before the media type and the route (it is valid: 403, not 401). */
    if (auth == AUTH_TOKEN && out->cred == ADMIT_CRED_READ && m != EVHTTP_REQ_GET)
        return ADMIT_READ_ONLY;
    /* ... and a JSON body type (checked once the caller is known: 401 says more) */
    if (rt != NULL && rt->auth == AUTH_TOKEN &&
        (m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT || m == EVHTTP_REQ_PATCH) &&
        !json_media_type(evhttp_find_header(in, "Content-Type")))
        return ADMIT_MEDIA_TYPE;
    if (unknown)
        return ADMIT_NOT_FOUND;
    return rt == NULL ? ADMIT_METHOD : ADMIT_GO;
}

void admit_decide(const struct admit_rules *r, const struct admit_req *q, struct admit *out)
{
    memset(out, 0, sizeof(*out));
    enum evhttp_cmd_type m = q->method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : q->method;
    enum route_auth auth = AUTH_TOKEN;
    if (route(r, q->path, m, out, &auth) != 0)
        out->allow = 0; /* a path that does not parse is unknown */
    /* CORS: the status reads follow STATUSRELAY_CORS_ORIGINS (default "*"), every other path
     * STATUSRELAY_ADMIN_CORS_ORIGINS (default none). */
    const char *cors = out->read_path ? r->cors_origins : r->admin_cors_origins;
    out->cors_on = cors != NULL && cors[0] != '\0';
    out->origin = evhttp_find_header(q->headers, "Origin");
    out->acao = cors_allow_origin(cors, out->origin);
    out->host = request_host(q->headers);
    out->cred = request_cred(r, q->headers);
    if (auth == AUTH_READ)
        out->anonymous = !read_caller_proven(r, q, out);
    if (out->allow == 0 && proxy_wants(r, q->path)) {
        out->verdict = ADMIT_PROXY; /* the client's own credentials: no admin token needed */
        out->body_cap = out->cred == ADMIT_CRED_ADMIN ? API_BODY_MAX : API_BODY_ANON_MAX;
        return;
    }
    out->verdict = judge(r, q, m, auth, out);
    out->body_cap = out->verdict != ADMIT_GO            ? -1
                    : out->route->auth == AUTH_TOKEN ? API_BODY_MAX
                                                     : API_BODY_ANON_MAX;
}

void admit_cleanup(struct admit *out)
{
    for (int i = 0; i < ROUTE_MAX_PARAMS; i++) {
        free(out->param[i]);
        out->param[i] = NULL;
    }
}
