#ifndef CBOOKCACHE_SHIMS_H
#define CBOOKCACHE_SHIMS_H

/// Starts writing back a range of a file without waiting for it (Linux `sync_file_range` with
/// SYNC_FILE_RANGE_WRITE), so a later fsync has little left to do. Returns 0, or -1 where the
/// call does not exist; failure is harmless (the final fsync still makes the file durable).
int bookcache_start_writeback(int fd, long long offset, long long length);

/// Names the calling thread (Linux keeps 15 bytes; a longer name is cut there). 0, or an errno.
int bookcache_name_current_thread(const char *name);

/// Marks the calling thread as one of the blocking-work pool's (for the rest of its life).
void bookcache_mark_blocking_thread(void);
/// 1 on a thread marked by bookcache_mark_blocking_thread, else 0.
int bookcache_is_blocking_thread(void);

/// Takes an exclusive lock on the one byte at `offset` of `fd` without waiting, as an open file
/// description lock (Linux `F_OFD_SETLK`): it belongs to this open of the file, so two opens in one
/// process exclude each other, and closing the descriptor releases it.
/// Returns 0 when taken, 1 when another open holds it, -1 on error (errno set; ENOTSUP where
/// such locks do not exist).
int bookcache_try_lock_byte(int fd, long long offset);

/// Whether another open holds the lock `bookcache_try_lock_byte` would take: 0 free, 1 held, -1 error.
int bookcache_test_lock_byte(int fd, long long offset);

/// The CRC-32 of `count` bytes (zlib's, computed by libdeflate), continuing from `crc` (0 to start).
unsigned int bookcache_crc32(unsigned int crc, const void *bytes, unsigned long long count);

/// The CRC-32 of two pieces one after the other, from the CRC of each and the second's length
/// (zlib's `crc32_combine64`).
unsigned int bookcache_crc32_combine(unsigned int first, unsigned int second, long long secondLength);

/// Inflates a zlib (FlateDecode) stream, discarding what it decodes: 0 when it ends cleanly with
/// its checksum right, 1 when its data is wrong (`*message` says how: "invalid distance too far
/// back", "incorrect data check" for a checksum that does not match…), 2 when it stops before its
/// end, 3 when it decodes to more than `limit` bytes (it is not inflated further), -1 when out of
/// memory. `*produced` is how many bytes it decoded to.
int bookcache_inflate_check(const void *bytes, unsigned long long count, unsigned long long limit,
                            unsigned long long *produced, const char **message);

/// A raw deflate stream (a ZIP entry's data) inflated as its bytes arrive, the output discarded
/// but counted and CRC-32'd. NULL when out of memory.
void *bookcache_entry_inflater_new(void);

/// Starts the inflater over for the next entry. Returns 0, or -1 when zlib cannot.
int bookcache_entry_inflater_reset(void *inflater);

/// Feeds `count` compressed bytes. `*crc` and `*produced` grow by what comes out; output past
/// `limit` bytes in all stops it. Returns 0 when more input is wanted, 1 when the stream ended
/// exactly at the last byte given, -1 when the data is wrong, ended early (bytes left over), or
/// produced more than `limit`.
int bookcache_entry_inflater_feed(void *inflater, const void *bytes, unsigned long long count, unsigned int *crc,
                                  unsigned long long *produced, unsigned long long limit);

void bookcache_entry_inflater_free(void *inflater);

/// A running SHA-256 from the system's OpenSSL (libcrypto, which libcurl already loads). Returns
/// NULL when out of memory.
void *bookcache_sha256_new(void);

/// Adds `count` bytes. Returns 1, or 0 on failure.
int bookcache_sha256_update(void *context, const void *bytes, unsigned long long count);

/// Writes the 32-byte digest to `digest` and frees the context. Returns 1, or 0 on failure.
int bookcache_sha256_finish(void *context, unsigned char *digest);

/// A copy of a running SHA-256, to finish on its own (the digest of the bytes so far) while the
/// original goes on. Returns NULL when out of memory.
void *bookcache_sha256_copy(void *context);

/// Frees a context that is not finished.
void bookcache_sha256_free(void *context);

/// HMAC-SHA256 (OpenSSL's `HMAC`) of `message` under `key`: 32 bytes into `digest`. Returns 1, or 0 on failure.
int bookcache_hmac_sha256(const void *key, unsigned long long keyLength, const void *message, unsigned long long messageLength,
                          unsigned char *digest);

/// PBKDF2-HMAC-SHA256 (OpenSSL's `PKCS5_PBKDF2_HMAC`) of a password: `length` bytes into `key`.
/// Returns 1, or 0 on failure.
int bookcache_pbkdf2_sha256(const void *password, unsigned long long passwordLength, const unsigned char *salt,
                            unsigned long long saltLength, unsigned int iterations, unsigned char *key, unsigned int length);

/// Caps glibc's malloc arenas at `count` (`mallopt(M_ARENA_MAX)`). Returns 1, or 0 where there
/// is no such setting (not glibc) or it failed.
int bookcache_limit_malloc_arenas(int count);

/// `bytes` repeated `repeat` times, deflated (zlib format) into `*out`, which the caller frees.
/// Returns 0, or -1 when zlib fails. For tests that build streams far larger decoded than stored.
int bookcache_deflate_repeated(const void *bytes, unsigned long long count, unsigned long long repeat, void **out,
                               unsigned long long *outCount);

/// Has a `posix_spawn` close every descriptor from `lowest` up in the child
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34); `actions` is a
/// `posix_spawn_file_actions_t *`. Returns 0, or an error number (ENOSYS where there is none).
int bookcache_spawn_close_from(void *actions, int lowest);

#endif
