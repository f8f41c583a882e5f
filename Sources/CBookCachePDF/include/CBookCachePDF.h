#ifndef CBOOKCACHEPDF_H
#define CBOOKCACHEPDF_H

// A PDF's streams decoded through a counting bound, with qpdf's C++ API (qpdf's C API only
// decodes a stream whole into one buffer). The decoded bytes are counted and dropped, never kept.

#ifdef __cplusplus
extern "C" {
#endif

/// A second reading of a PDF already in memory, for bounded decoding; NULL when qpdf cannot read
/// it. `bytes` must outlive the decoder.
void *bookcache_pdf_decoder_new(const void *bytes, unsigned long long count);

/// Decodes the stream `objid generation` at qpdf's decode level `level` (1 generalized,
/// 2 specialized), counting what comes out and stopping once it passes its bound: `ratio` times
/// its stored bytes (`*stored`), but never less than `floor`, and never more than `cap`.
/// Returns 0 when it decoded whole (`*produced` bytes), 1 when it passed its bound, 2 when it
/// could not be decoded (`*message`, valid until the next call, says why), 3 when qpdf does not
/// decode its filters at that level (its stored bytes are taken as they are). `*warnings` (valid
/// until the next call) holds qpdf's other warnings about it, one per line, or is empty.
int bookcache_pdf_decode(void *decoder, int objid, int generation, int level, unsigned long long ratio,
                         unsigned long long floor, unsigned long long cap, unsigned long long *stored,
                         unsigned long long *produced, const char **message, const char **warnings);

void bookcache_pdf_decoder_free(void *decoder);

#ifdef __cplusplus
}
#endif

#endif
