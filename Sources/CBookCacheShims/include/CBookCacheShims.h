#ifndef CBOOKCACHE_SHIMS_H
#define CBOOKCACHE_SHIMS_H

/// Starts writing back a range of a file without waiting for it (Linux `sync_file_range` with
/// SYNC_FILE_RANGE_WRITE), so a later fsync has little left to do. Returns 0, or -1 where the
/// call does not exist; failure is harmless (the final fsync still makes the file durable).
int bookcache_start_writeback(int fd, long long offset, long long length);

#endif
