/* admit.h (api) - admission, decided once: a request's method, path and headers (and the few
 * settings that bear on them) -> its route, the methods its path allows, the verdict (the answer
 * it gets on its head alone, the pass-through, or go) and so how many body bytes it may send.
 * Both the gate (gate.c: before evhttp reads a body) and on_request (server.c: the answer) ask
 * admit_decide, so a rule cannot change in one of them only (a refused caller's body buffered,
 * or a valid caller's body refused).
 *
 * The rules, in the order they are applied (the first that applies is the verdict):
 *   1. a path no route matches, that the pass-through forwards (passthrough on, not one of our
 *      namespaces: /v1*, /intents/status*, /healthz, /readyz, /metrics): ADMIT_PROXY, with the
 *      larger body cap only with the admin token (the pass-through needs none);
 *   2. OPTIONS on a known path whose CORS setting lists origins: ADMIT_OPTIONS (a preflight
 *      carries no credentials);
 *   3. without an admin token, a Host that does not name us (DNS rebinding; two Host headers
 *      never do): ADMIT_FORBIDDEN_HOST;
 *   4. a state-changing request (not GET/HEAD) on a token route from an Origin the admin CORS
 *      setting does not list: ADMIT_FORBIDDEN_ORIGIN;
 *   5. the admin token missing where it is needed (token routes, unknown paths, the status reads
 *      with status_require_token): ADMIT_UNAUTHORIZED (the read token counts as present);
 *   5b. the read token (STATUSRELAY_READ_TOKEN) on a token route or unknown path with a method
 *      other than GET/HEAD: ADMIT_READ_ONLY (it is valid, so 403, not 401);
 *   6. POST/PUT/PATCH on a token route without Content-Type: application/json: ADMIT_MEDIA_TYPE;
 *   7. no route matches the path: ADMIT_NOT_FOUND; the path, but not the method: ADMIT_METHOD;
 *   8. otherwise ADMIT_GO.
 * A status read (route auth AUTH_READ) is "anonymous" unless its caller proved who it is: with
 * an admin token by presenting it (or the read token), without one by being on loopback and
 * sending no Origin.
 * Tokens are compared by admit_token alone (also for listen.c's reserve and proxy.c's header
 * filter): both configured tokens always, over SHA-256 digests, in constant time.
 *
 * Pure: no I/O, no clock, no daemon state (the caller passes the settings in as admit_rules).
 * runs on: the core thread in the daemon (any thread: it keeps no state). */
#ifndef RELAY_API_ADMIT_H
#define RELAY_API_ADMIT_H

#include "relay/api/internal.h"

#include <stdint.h>

#define API_BODY_MAX (1024 * 1024)          /* larger bodies: 413 with our JSON error */
#define API_BODY_ANON_MAX (64 * 1024)       /* bodies of requests not authenticated by the token */
#define API_BODY_HARD_MAX (8 * 1024 * 1024) /* refused bodies up to this are read and dropped */

/* The settings admission reads, borrowed (from struct config) for as long as the rules are used. */
struct admit_rules {
    const struct route *routes; /* the route table (first match wins) and its length */
    size_t nroutes;
    const char *admin_token;        /* NULL or "": none */
    const char *allowed_hosts;      /* STATUSRELAY_ALLOWED_HOSTS (NULL: loopback names only) */
    const char *cors_origins;       /* STATUSRELAY_CORS_ORIGINS: the status reads */
    const char *admin_cors_origins; /* STATUSRELAY_ADMIN_CORS_ORIGINS: every other path */
    int status_require_token;       /* the status reads need the token too */
    int passthrough;                /* paths we do not serve go to the upstream (proxy.c) */
    const char *read_token;         /* STATUSRELAY_READ_TOKEN (GET/HEAD only); NULL or "": none */
    /* SHA-256 of admin_token and read_token, set by admit_rules_keys (zeros: no token matches) */
    unsigned char admin_md[32], read_md[32];
};

/* One request's head. Everything is borrowed for the call. */
struct admit_req {
    enum evhttp_cmd_type method; /* HEAD is judged as GET */
    const char *path;            /* raw (percent-encoded); NULL: the target did not parse */
    struct evkeyvalq *headers;
    const struct proto_ip *client; /* the client address, or NULL (unknown: not loopback) */
};

enum admit_verdict {
    ADMIT_GO,               /* run the route's handler */
    ADMIT_PROXY,            /* forward it to the upstream (proxy.c) */
    ADMIT_OPTIONS,          /* answer the OPTIONS request (Allow, CORS preflight) */
    ADMIT_FORBIDDEN_HOST,   /* 403 forbidden_host */
    ADMIT_FORBIDDEN_ORIGIN, /* 403 forbidden_origin */
    ADMIT_UNAUTHORIZED,     /* 401 unauthorized */
    ADMIT_MEDIA_TYPE,       /* 415 unsupported_media_type */
    ADMIT_NOT_FOUND,        /* 404 not_found */
    ADMIT_METHOD,           /* 405 method_not_allowed (Allow: the path's methods) */
    ADMIT_READ_ONLY,        /* 403 read_only_token: the read token on a state-changing method */
};

/* The configured token a request presented. */
enum admit_cred {
    ADMIT_CRED_NONE = 0, /* none, a wrong one, or no Authorization header */
    ADMIT_CRED_ADMIN,    /* STATUSRELAY_ADMIN_TOKEN */
    ADMIT_CRED_READ,     /* STATUSRELAY_READ_TOKEN */
};

struct admit {
    enum admit_verdict verdict;
    const struct route *route; /* the row matching path and method, or NULL */
    unsigned allow;            /* the methods of the rows matching the path (0: unknown path) */
    int read_path;             /* a status read path: upstream error shape, cors_origins */
    int cors_on;               /* the path's CORS setting lists origins (OPTIONS answered) */
    const char *origin;        /* the Origin header, or NULL (borrowed from the headers) */
    const char *acao;          /* Access-Control-Allow-Origin to send, or NULL (borrowed) */
    const char *host;          /* the Host, NULL when none, a marker when several (borrowed) */
    int anonymous;             /* a status read whose caller proved nothing */
    enum admit_cred cred;      /* the token its Authorization header presents */
    int64_t body_cap;          /* body bytes allowed: API_BODY_MAX, API_BODY_ANON_MAX, or -1
                                * for a request answered on its head alone */
    char *param[ROUTE_MAX_PARAMS]; /* the route's decoded path parameters (owned; NUL-ended,
                                    * param_len is the truth: NULs may be inside) */
    size_t param_len[ROUTE_MAX_PARAMS];
};

/* Judge q by rules into out (every field set on every path). out->param is owned by out:
 * admit_cleanup frees it; a caller keeping a parameter takes it and sets it to NULL. */
void admit_decide(const struct admit_rules *rules, const struct admit_req *q, struct admit *out);
/* Free what out owns. */
void admit_cleanup(struct admit *out);
/* The methods of allow as an Allow header value ("GET, HEAD, POST") into list (n bytes); HEAD
 * comes with GET, and OPTIONS is listed when options is set. */
void admit_allow_list(unsigned allow, int options, char *list, size_t n);
/* Set the token digests of rules from its admin_token and read_token: once, after filling it
 * (and again if a token changes); without it no token matches (fails closed). */
void admit_rules_keys(struct admit_rules *rules);
/* Which configured token the n bytes of tok are (blanks around them ignored). Both tokens are
 * always compared, as SHA-256 digests with CRYPTO_memcmp, so the time taken tells neither
 * which one matched nor how long they are. */
enum admit_cred admit_token(const struct admit_rules *rules, const char *tok, size_t n);
/* The same for an Authorization value of n bytes: "Bearer <token>" (scheme in any case);
 * anything else is ADMIT_CRED_NONE. */
enum admit_cred admit_bearer(const struct admit_rules *rules, const char *v, size_t n);
/* The method named by the n bytes of m ("GET"), or 0 when it is none of ours. */
enum evhttp_cmd_type admit_method(const char *m, size_t n);

#endif
