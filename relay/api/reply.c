/* reply.c (api) - the request context's life and the replies and parsers every handler uses
 * (declared in internal.h). runs on: core thread.
 *
 * One struct ctx per HTTP request: created by api_ctx_new (on_request, server.c), finished by
 * exactly one api_reply_* / api_send_* call (which frees it). Handlers that wait for Redis or
 * the upstream return and finish the ctx from their callback. Every ctx sits in api->pending
 * until it is finished, so that a connection closing under it (server.c's close hook) or
 * api_free can mark it gone: ctx->req = NULL (the evhttp request is freed by evhttp, or by the
 * close hook when evhttp detached it) and, after api_free, ctx->api = NULL. A gone ctx is freed
 * by its callback without writing anything. */
#include "relay/api/internal.h"
#include "protocol/proto.h"
#include "protocol/rest_req.h"
#include "relay/common/util.h"
#include "relay/core.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ctx lifecycle --------------------------------------------------------------------------- */

static void ctx_unlink(struct ctx *x)
{
    if (!x->linked)
        return;
    if (x->prev)
        x->prev->next = x->next;
    else
        x->api->pending = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
    x->linked = 0;
}

void api_ctx_free(struct ctx *x)
{
    ctx_unlink(x);
    for (int i = 0; i < ROUTE_MAX_PARAMS; i++)
        free(x->param[i]);
    evhttp_clear_headers(&x->query);
    for (size_t i = 0; i < x->nids; i++)
        free(x->ids[i]);
    free(x->ids);
    free(x->next_cursor);
    free(x);
}

struct ctx *api_ctx_new(struct api *a, struct evhttp_request *req)
{
    struct ctx *x = xcalloc(1, sizeof(*x));
    x->api = a;
    x->req = req;
    x->evcon = evhttp_request_get_connection(req);
    TAILQ_INIT(&x->query);
    x->next = a->pending;
    if (a->pending)
        a->pending->prev = x;
    a->pending = x;
    x->linked = 1;
    return x;
}

/* ---- replies: each finishes (frees) the ctx -------------------------------------------------- */

void api_count_answer(struct ctx *x, int code)
{
    if (x->api != NULL && code >= 100 && code < 600)
        x->api->c->metrics.api_responses[code / 100 - 1]++;
}

static void add_common_headers(struct ctx *x, const char *ctype)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(x->req);
    if (ctype != NULL)
        evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
}

void api_send_body(struct ctx *x, int code, const char *ctype, const char *buf, size_t len)
{
    if (x->req != NULL) {
        api_count_answer(x, code);
        if (code != 204) {
            add_common_headers(x, ctype);
            if (x->head) {
                char n[24];
                snprintf(n, sizeof(n), "%zu", len);
                evhttp_add_header(evhttp_request_get_output_headers(x->req), "Content-Length", n);
            } else if (len > 0) {
                evbuffer_add(evhttp_request_get_output_buffer(x->req), buf, len);
            }
        }
        evhttp_send_reply(x->req, code, NULL, NULL);
    }
    api_ctx_free(x);
}

void api_send_evbuffer(struct ctx *x, int code, const char *ctype, struct evbuffer *b)
{
    if (x->req != NULL) {
        api_count_answer(x, code);
        add_common_headers(x, ctype);
        if (x->head) {
            char n[24];
            snprintf(n, sizeof(n), "%zu", evbuffer_get_length(b));
            evhttp_add_header(evhttp_request_get_output_headers(x->req), "Content-Length", n);
        } else {
            evbuffer_add_buffer(evhttp_request_get_output_buffer(x->req), b);
        }
        evhttp_send_reply(x->req, code, NULL, NULL);
    }
    api_ctx_free(x);
}

void api_reply_oom(struct ctx *x)
{
    static const char body[] = "{\"message\":\"out of memory\",\"error\":{\"code\":\"internal\","
                               "\"message\":\"out of memory\"}}";
    api_send_body(x, 500, CT_JSON, body, sizeof(body) - 1);
}

/* Takes body (a new reference). */
void api_reply_json(struct ctx *x, int code, json_t *body)
{
    char *t = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (t == NULL) {
        api_reply_oom(x);
        return;
    }
    api_send_body(x, code, CT_JSON, t, strlen(t));
    free(t);
}

void api_reply_empty(struct ctx *x, int code)
{
    api_send_body(x, code, NULL, NULL, 0);
}

/* {"message","error":{"code","message"[,"field"]}}; on upstream-shaped routes also the upstream's
 * "errorCode" (code in upper case; invalid_parameter is INVALID_INPUT_PARAMETERS). field may be
 * NULL. */
void __attribute__((format(printf, 5, 6)))
api_reply_error(struct ctx *x, int code, const char *ecode, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:s,s:s}", "code", ecode, "message", msg);
    if (err != NULL && field != NULL && field[0] != '\0')
        json_object_set_new(err, "field", json_string(field));
    json_t *o = err != NULL ? json_pack("{s:s,s:o}", "message", msg, "error", err) : NULL;
    if (o != NULL && x->upstream_shape) {
        char up[64];
        size_t i = 0;
        if (strcmp(ecode, "invalid_parameter") == 0)
            ecode = "invalid_input_parameters"; /* the upstream's name for it */
        for (; ecode[i] != '\0' && i < sizeof(up) - 1; i++)
            up[i] = (char)(ecode[i] >= 'a' && ecode[i] <= 'z' ? ecode[i] - 'a' + 'A' : ecode[i]);
        up[i] = '\0';
        json_object_set_new(o, "errorCode", json_string(up));
    }
    api_reply_json(x, code, o);
}

void api_reply_unavailable(struct ctx *x, const char *what)
{
    if (x->req != NULL)
        evhttp_add_header(evhttp_request_get_output_headers(x->req), "Retry-After", "1");
    api_reply_error(x, 503, "store_unavailable", NULL, "%s: Redis is unavailable, retry shortly",
                    what);
}

/* ---- small parsers --------------------------------------------------------------------------- */

const char *api_query_get(struct ctx *x, const char *k)
{
    return evhttp_find_header(&x->query, k);
}

/* Parse the "limit" query parameter: default def, values above max clamped to max. Returns 0, or -1
 * after answering 400. */
int api_parse_limit(struct ctx *x, int def, int max)
{
    const char *s = api_query_get(x, "limit");
    x->limit = def;
    if (s == NULL || s[0] == '\0')
        return 0;
    if (proto_rest_limit(s, def, max, &x->limit) != 0) {
        api_reply_error(x, 400, "invalid_parameter", "limit",
                        "limit must be a positive integer (at most %d)", max);
        return -1;
    }
    return 0;
}

/* Copy a request id (path parameter or query value of length len) into x->id. Returns 0, or -1
 * after answering 400. */
int api_take_id(struct ctx *x, const char *s, size_t len, const char *field)
{
    if (s == NULL || len == 0) {
        api_reply_error(x, 400, "invalid_request_id", field, "%s is required", field);
        return -1;
    }
    if (!proto_request_id_valid(s, len) || len > PROTO_MAX_ID) {
        api_reply_error(x, 400, "invalid_request_id", field,
                        "%s must be 1..%d characters of A-Z a-z 0-9 _ : . -", field, PROTO_MAX_ID);
        return -1;
    }
    memcpy(x->id, s, len);
    x->id[len] = '\0';
    return 0;
}

/* Parse the request body as JSON. Returns a new reference, or NULL after answering 400. */
json_t *api_parse_body(struct ctx *x)
{
    if (x->body_len == 0) {
        api_reply_error(x, 400, "invalid_body", NULL, "a JSON body is required");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(x->body, x->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (root == NULL) {
        /* je.text may quote the input: keep the message plain ASCII and short */
        char clean[96];
        size_t i = 0;
        for (const char *p = je.text; *p != '\0' && i < sizeof(clean) - 1; p++)
            clean[i++] = (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ? *p : '?';
        clean[i] = '\0';
        api_reply_error(x, 400, "invalid_json", NULL,
                        "body is not valid JSON: %s (line %d, column %d)", clean, je.line,
                        je.column);
        return NULL;
    }
    return root;
}
