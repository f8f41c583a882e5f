#ifndef BOOKCACHE_CLIBZIP_SHIM_H
#define BOOKCACHE_CLIBZIP_SHIM_H
#include <zip.h>
#endif
