/* embedded.c - lookup over the generated table. runs on: any thread. */
#include "relay/common/embedded.h"

#include <string.h>

const struct embedded_file *embedded_find(const char *path)
{
    for (const struct embedded_file *f = embedded_files; f->path != NULL; f++)
        if (strcmp(f->path, path) == 0)
            return f;
    return NULL;
}
