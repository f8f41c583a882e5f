/* A bare libzip CRC pass: opens an archive with consistency checks and reads every entry
 * through, so libzip checks each CRC. The baseline for `bookcache verify`.
 *   cc -O2 -o zipcrc Benchmarks/zipcrc.c -lzip && ./zipcrc book.epub */
#include <stdio.h>
#include <stdlib.h>
#include <zip.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: zipcrc FILE\n"); return 2; }
    int error = 0;
    zip_t *archive = zip_open(argv[1], ZIP_CHECKCONS | ZIP_RDONLY, &error);
    if (!archive) { fprintf(stderr, "cannot open %s (%d)\n", argv[1], error); return 1; }
    static char buffer[1 << 20];
    zip_int64_t count = zip_get_num_entries(archive, 0);
    for (zip_int64_t i = 0; i < count; i++) {
        zip_file_t *file = zip_fopen_index(archive, (zip_uint64_t)i, 0);
        if (!file) { fprintf(stderr, "cannot open entry %lld\n", (long long)i); return 1; }
        zip_int64_t n;
        while ((n = zip_fread(file, buffer, sizeof buffer)) > 0) {}
        if (n < 0 || zip_fclose(file) != 0) { fprintf(stderr, "entry %lld is damaged\n", (long long)i); return 1; }
    }
    zip_discard(archive);
    return 0;
}
