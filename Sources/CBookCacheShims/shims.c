#define _GNU_SOURCE
#include "CBookCacheShims.h"
#include <fcntl.h>

int bookcache_start_writeback(int fd, long long offset, long long length) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)length;
    return -1;
#endif
}
