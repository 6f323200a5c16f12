/* zdict.h - the stored compressed forms of store/: a tag byte, then a zlib stream (level 9)
 * written with a preset dictionary. store/facts.c (the request's facts and their deltas) and
 * store/rec.c (the request's record) each own their tags and dictionaries; a stream of
 * another dictionary is detected by its checksum, never misread.
 * runs on: any thread (pure). */
#ifndef STORE_ZDICT_H
#define STORE_ZDICT_H

#include <stddef.h>

#define ZDICT_MAX_TEXT (1024 * 1024) /* protocol/facts.h bounds a facts text to ~400 KiB */

/* tag then a zlib stream of text[0..len) with the preset dictionary d[0..dn); *out
 * malloc'd (caller frees). Returns 0, or -1 (out of memory, text over ZDICT_MAX_TEXT). */
int store_zdict_deflate(char tag, const char *text, size_t len, const char *d, size_t dn,
                        char **out, size_t *out_len);
/* The text of such a stream raw[0..len) (without its tag), *out malloc'd and NUL-terminated.
 * Returns 0, or -1 (out of memory, over ZDICT_MAX_TEXT, or not such a stream). */
int store_zdict_inflate(const char *raw, size_t len, const char *d, size_t dn, char **out,
                        size_t *out_len);

#endif
