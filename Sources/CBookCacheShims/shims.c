#define _GNU_SOURCE
#include "CBookCacheShims.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <zlib.h>

int bookcache_start_writeback(int fd, long long offset, long long length) {
#if defined(__linux__)
    return sync_file_range(fd, (off_t)offset, (off_t)length, SYNC_FILE_RANGE_WRITE);
#else
    (void)fd; (void)offset; (void)length;
    return -1;
#endif
}

static int bookcache_byte_lock(int fd, long long offset, int command) {
#if defined(__linux__) && defined(F_OFD_SETLK)
    struct flock lock = {0};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = (off_t)offset;
    lock.l_len = 1;
    lock.l_pid = 0;
    if (fcntl(fd, command, &lock) != 0) {
        return (errno == EAGAIN || errno == EACCES) ? 1 : -1;
    }
    if (command == F_OFD_GETLK) {
        return lock.l_type == F_UNLCK ? 0 : 1;
    }
    return 0;
#else
    (void)fd; (void)offset; (void)command;
    errno = ENOTSUP;
    return -1;
#endif
}

int bookcache_try_lock_byte(int fd, long long offset) {
#if defined(__linux__) && defined(F_OFD_SETLK)
    return bookcache_byte_lock(fd, offset, F_OFD_SETLK);
#else
    return bookcache_byte_lock(fd, offset, 0);
#endif
}

int bookcache_test_lock_byte(int fd, long long offset) {
#if defined(__linux__) && defined(F_OFD_GETLK)
    return bookcache_byte_lock(fd, offset, F_OFD_GETLK);
#else
    return bookcache_byte_lock(fd, offset, 0);
#endif
}

unsigned int bookcache_crc32_combine(unsigned int first, unsigned int second, long long secondLength) {
    return (unsigned int)crc32_combine64(first, second, (z_off64_t)secondLength);
}

#include <libdeflate.h>

unsigned int bookcache_crc32(unsigned int crc, const void *bytes, unsigned long long count) {
    return (unsigned int)libdeflate_crc32(crc, bytes, (size_t)count);
}

#include <openssl/evp.h>

void *bookcache_sha256_new(void) {
    EVP_MD_CTX *context = EVP_MD_CTX_new();
    if (context == NULL) return NULL;
    if (EVP_DigestInit_ex(context, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(context);
        return NULL;
    }
    return context;
}

int bookcache_sha256_update(void *context, const void *bytes, unsigned long long count) {
    return EVP_DigestUpdate((EVP_MD_CTX *)context, bytes, (size_t)count);
}

int bookcache_sha256_finish(void *context, unsigned char *digest) {
    unsigned int length = 0;
    int ok = EVP_DigestFinal_ex((EVP_MD_CTX *)context, digest, &length);
    EVP_MD_CTX_free((EVP_MD_CTX *)context);
    return ok == 1 && length == 32;
}

void *bookcache_sha256_copy(void *context) {
    EVP_MD_CTX *copy = EVP_MD_CTX_new();
    if (copy == NULL) return NULL;
    if (EVP_MD_CTX_copy_ex(copy, (const EVP_MD_CTX *)context) != 1) {
        EVP_MD_CTX_free(copy);
        return NULL;
    }
    return copy;
}

void bookcache_sha256_free(void *context) {
    EVP_MD_CTX_free((EVP_MD_CTX *)context);
}

#if defined(__GLIBC__)
#include <malloc.h>
int bookcache_limit_malloc_arenas(int count) { return mallopt(M_ARENA_MAX, count); }
#else
int bookcache_limit_malloc_arenas(int count) { (void)count; return 0; }
#endif

#include <openssl/hmac.h>

int bookcache_hmac_sha256(const void *key, unsigned long long keyLength, const void *message, unsigned long long messageLength,
                          unsigned char *digest) {
    unsigned int length = 0;
    if (keyLength > 0x7fffffff) return 0;
    return HMAC(EVP_sha256(), key, (int)keyLength, (const unsigned char *)message, (size_t)messageLength, digest, &length) != NULL &&
           length == 32;
}

int bookcache_pbkdf2_sha256(const void *password, unsigned long long passwordLength, const unsigned char *salt,
                            unsigned long long saltLength, unsigned int iterations, unsigned char *key, unsigned int length) {
    if (passwordLength > 0x7fffffff || saltLength > 0x7fffffff || iterations == 0 || iterations > 0x7fffffff) return 0;
    return PKCS5_PBKDF2_HMAC((const char *)password, (int)passwordLength, salt, (int)saltLength, (int)iterations, EVP_sha256(),
                             (int)length, key);
}

int bookcache_inflate_check(const void *bytes, unsigned long long count, unsigned long long limit,
                            unsigned long long *produced, const char **message) {
    z_stream stream = {0};
    unsigned char out[65536];
    *message = NULL;
    *produced = 0;
    if (inflateInit(&stream) != Z_OK) return -1;
    stream.next_in = (Bytef *)bytes;
    int result = Z_OK;
    unsigned long long left = count;
    while (result == Z_OK) {
        if (stream.avail_in == 0) {
            if (left == 0) break;
            unsigned int chunk = left > 0x40000000ULL ? 0x40000000U : (unsigned int)left;
            stream.avail_in = chunk;
            left -= chunk;
        }
        stream.next_out = out;
        stream.avail_out = sizeof out;
        result = inflate(&stream, Z_NO_FLUSH);
        *produced += sizeof out - stream.avail_out;
        if (*produced > limit) {
            inflateEnd(&stream);
            return 3;
        }
        if (result == Z_BUF_ERROR && stream.avail_in == 0 && left == 0) break;
        if (result == Z_BUF_ERROR) result = Z_OK;
    }
    int verdict = result == Z_STREAM_END ? 0 : (result == Z_DATA_ERROR ? 1 : (result == Z_MEM_ERROR ? -1 : 2));
    if (verdict == 1) *message = stream.msg;
    inflateEnd(&stream);
    return verdict;
}

#include <stdlib.h>

struct bookcache_entry_inflater {
    z_stream stream;
    unsigned char out[16384];
};

void *bookcache_entry_inflater_new(void) {
    struct bookcache_entry_inflater *inflater = calloc(1, sizeof *inflater);
    if (inflater == NULL) return NULL;
    if (inflateInit2(&inflater->stream, -MAX_WBITS) != Z_OK) {
        free(inflater);
        return NULL;
    }
    return inflater;
}

int bookcache_entry_inflater_reset(void *opaque) {
    struct bookcache_entry_inflater *inflater = opaque;
    return inflateReset(&inflater->stream) == Z_OK ? 0 : -1;
}

int bookcache_entry_inflater_feed(void *opaque, const void *bytes, unsigned long long count, unsigned int *crc,
                                  unsigned long long *produced, unsigned long long limit) {
    struct bookcache_entry_inflater *inflater = opaque;
    z_stream *stream = &inflater->stream;
    const unsigned char *next = bytes;
    unsigned long long left = count;
    for (;;) {
        if (stream->avail_in == 0 && left > 0) {
            unsigned int chunk = left > 0x40000000ULL ? 0x40000000U : (unsigned int)left;
            stream->next_in = (Bytef *)next;
            stream->avail_in = chunk;
            next += chunk;
            left -= chunk;
        }
        stream->next_out = inflater->out;
        stream->avail_out = sizeof inflater->out;
        int result = inflate(stream, Z_NO_FLUSH);
        unsigned long long made = sizeof inflater->out - stream->avail_out;
        *crc = bookcache_crc32(*crc, inflater->out, made);
        *produced += made;
        if (*produced > limit) return -1;
        int inputLeft = stream->avail_in > 0 || left > 0;
        if (result == Z_STREAM_END) return inputLeft ? -1 : 1;
        // No progress possible: fine when every byte given was taken (more is wanted).
        if (result == Z_BUF_ERROR) return inputLeft ? -1 : 0;
        if (result != Z_OK) return -1;
        // Everything given was taken and nothing waits to come out.
        if (!inputLeft && stream->avail_out > 0) return 0;
    }
}

void bookcache_entry_inflater_free(void *opaque) {
    struct bookcache_entry_inflater *inflater = opaque;
    if (inflater == NULL) return;
    inflateEnd(&inflater->stream);
    free(inflater);
}

int bookcache_name_current_thread(const char *name) {
#if defined(__linux__)
    char kept[16];
    strncpy(kept, name, sizeof kept - 1);
    kept[sizeof kept - 1] = 0;
    return pthread_setname_np(pthread_self(), kept);
#else
    (void)name;
    return ENOSYS;
#endif
}

static _Thread_local int blocking_thread;

void bookcache_mark_blocking_thread(void) {
    blocking_thread = 1;
}

int bookcache_is_blocking_thread(void) {
    return blocking_thread;
}

/* `bytes` repeated `repeat` times, deflated with zlib's header and checksum into a buffer
   `*out` (freed by the caller with free). Returns 0, or -1 when zlib fails. For tests that
   build PDFs whose streams decode far larger than they are. */
int bookcache_deflate_repeated(const void *bytes, unsigned long long count, unsigned long long repeat, void **out,
                               unsigned long long *outCount) {
    z_stream stream = {0};
    if (deflateInit(&stream, 9) != Z_OK) return -1;
    size_t capacity = 65536, used = 0;
    unsigned char *buffer = malloc(capacity);
    if (buffer == NULL) {
        deflateEnd(&stream);
        return -1;
    }
    for (unsigned long long round = 0; round <= repeat; round++) {
        int last = round == repeat;
        stream.next_in = (Bytef *)bytes;
        stream.avail_in = last ? 0 : (unsigned int)count;
        int result;
        do {
            if (capacity - used < 65536) {
                capacity *= 2;
                unsigned char *grown = realloc(buffer, capacity);
                if (grown == NULL) {
                    free(buffer);
                    deflateEnd(&stream);
                    return -1;
                }
                buffer = grown;
            }
            stream.next_out = buffer + used;
            stream.avail_out = (unsigned int)(capacity - used);
            result = deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH);
            used = capacity - stream.avail_out;
        } while (stream.avail_out == 0 || (last && result != Z_STREAM_END));
    }
    deflateEnd(&stream);
    *out = buffer;
    *outCount = used;
    return 0;
}

#include <spawn.h>

int bookcache_spawn_close_from(void *actions, int lowest) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, lowest);
#else
    (void)actions;
    (void)lowest;
    return ENOSYS;
#endif
}
