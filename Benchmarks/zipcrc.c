/* A bare libzip CRC pass: opens each archive with consistency checks and reads every entry
 * through, so libzip checks each CRC. The baseline for `bookcache verify`, and the check in the
 * batches' "same promise" peer (curl, then sync, then this and sha256sum).
 *   cc -O2 -o zipcrc Benchmarks/zipcrc.c -lzip && ./zipcrc book.epub [more.epub ...] */
#include <stdio.h>
#include <stdlib.h>
#include <zip.h>

static int check(const char *path) {
    int error = 0;
    zip_t *archive = zip_open(path, ZIP_CHECKCONS | ZIP_RDONLY, &error);
    if (!archive) { fprintf(stderr, "cannot open %s (%d)\n", path, error); return 1; }
    static char buffer[1 << 20];
    zip_int64_t count = zip_get_num_entries(archive, 0);
    for (zip_int64_t i = 0; i < count; i++) {
        zip_file_t *file = zip_fopen_index(archive, (zip_uint64_t)i, 0);
        if (!file) { fprintf(stderr, "%s: cannot open entry %lld\n", path, (long long)i); zip_discard(archive); return 1; }
        zip_int64_t n;
        while ((n = zip_fread(file, buffer, sizeof buffer)) > 0) {}
        if (n < 0 || zip_fclose(file) != 0) { fprintf(stderr, "%s: entry %lld is damaged\n", path, (long long)i); zip_discard(archive); return 1; }
    }
    zip_discard(archive);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: zipcrc FILE [FILE ...]\n"); return 2; }
    int failed = 0;
    for (int i = 1; i < argc; i++) failed |= check(argv[i]);
    return failed;
}
