/* embedded.h - files compiled into the binary by relay/common/embed.pl (store/ Lua, relay/www/).
 * runs on: any thread (read-only data). */
#ifndef RELAY_EMBEDDED_H
#define RELAY_EMBEDDED_H

#include <stddef.h>

struct embedded_file {
    const char *path;          /* source path, e.g. "store/apply.lua" */
    const unsigned char *data; /* NUL-terminated after len bytes */
    size_t len;
};

extern const struct embedded_file embedded_files[]; /* ends with {NULL, NULL, 0} */

/* Look up by source path; NULL if absent. */
const struct embedded_file *embedded_find(const char *path);

#endif
