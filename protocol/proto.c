/* proto.c - error codes and shared validators of the pure protocol layer.
 *
 * No allocation here: proto_fail writes into the caller's fixed buffers.
 * runs on: any thread (no shared state). */
#include "protocol/proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *proto_strerror(int code)
{
    switch (code) {
    case PROTO_OK: return "ok";
    case PROTO_ENOMEM: return "nomem";
    case PROTO_EJSON: return "json";
    case PROTO_ETYPE: return "type";
    case PROTO_EMISSING: return "missing";
    case PROTO_ERANGE: return "range";
    case PROTO_ETOOLONG: return "toolong";
    case PROTO_EVALUE: return "value";
    case PROTO_EEVENT: return "event";
    case PROTO_ESIG: return "signature";
    case PROTO_ESTALE: return "stale";
    default: return "unknown";
    }
}

int proto_fail(struct proto_err *err, int code, const char *field, const char *msg)
{
    if (err != NULL) {
        err->code = code;
        snprintf(err->field, sizeof(err->field), "%s", field != NULL ? field : "");
        snprintf(err->msg, sizeof(err->msg), "%s", msg != NULL ? msg : proto_strerror(code));
    }
    return code;
}

int proto_request_id_valid(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > PROTO_MAX_ID)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == ':' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

int proto_hash_valid(const char *s, size_t len)
{
    if (s == NULL || len == 0 || len > PROTO_MAX_HASH)
        return 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\')
            return 0;
    }
    return 1;
}

int proto_hex_digit(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decimal digits at s into *v, up to UINT64_MAX: the first byte after them, or NULL when
 * there is no digit or the value does not fit (strtoull would clamp 2^64 to UINT64_MAX). */
static const char *u64_digits(const char *s, uint64_t *v)
{
    const char *p = s;
    *v = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (*v > (UINT64_MAX - d) / 10)
            return NULL;
        *v = *v * 10 + d;
    }
    return p == s ? NULL : p;
}

int proto_stream_id_parse(const char *s, uint64_t *ms, uint64_t *seq)
{
    const char *end;
    *seq = 0;
    if (s == NULL || (end = u64_digits(s, ms)) == NULL)
        return -1;
    if (*end == '\0')
        return 0;
    if (*end != '-' || (end = u64_digits(end + 1, seq)) == NULL)
        return -1;
    return *end == '\0' ? 0 : -1;
}
