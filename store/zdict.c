/* zdict.c - see zdict.h. runs on: any thread (pure). */
#include "store/zdict.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int store_zdict_deflate(char tag, const char *text, size_t len, const char *d, size_t dn,
                        char **out, size_t *out_len)
{
    *out = NULL;
    if (len > ZDICT_MAX_TEXT)
        return -1;
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, 9, Z_DEFLATED, 15, 9, Z_DEFAULT_STRATEGY) != Z_OK)
        return -1;
    if (deflateSetDictionary(&z, (const Bytef *)d, (uInt)dn) != Z_OK) {
        deflateEnd(&z);
        return -1;
    }
    size_t cap = 1 + deflateBound(&z, (uLong)len);
    char *buf = malloc(cap);
    if (buf == NULL) {
        deflateEnd(&z);
        return -1;
    }
    buf[0] = tag;
    z.next_in = (Bytef *)(uintptr_t)text;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)buf + 1;
    z.avail_out = (uInt)(cap - 1);
    int rc = deflate(&z, Z_FINISH);
    size_t n = 1 + z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = n;
    return 0;
}

int store_zdict_inflate(const char *raw, size_t len, const char *d, size_t dn, char **out,
                        size_t *out_len)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit(&z) != Z_OK)
        return -1;
    size_t cap = len * 8 + 256, n = 0;
    char *buf = malloc(cap + 1);
    z.next_in = (Bytef *)(uintptr_t)raw;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (buf != NULL) {
        z.next_out = (Bytef *)buf + n;
        z.avail_out = (uInt)(cap - n);
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc == Z_NEED_DICT)
            rc = inflateSetDictionary(&z, (const Bytef *)d, (uInt)dn);
        n = z.total_out;
        if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR))
            break;
        if (z.avail_out == 0) { /* grow */
            if (cap >= ZDICT_MAX_TEXT) {
                rc = Z_MEM_ERROR;
                break;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (nb == NULL)
                break;
            buf = nb;
        } else if (z.avail_in == 0) {
            rc = Z_DATA_ERROR; /* truncated */
            break;
        }
    }
    inflateEnd(&z);
    if (buf == NULL || rc != Z_STREAM_END) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *out_len = n;
    return 0;
}
