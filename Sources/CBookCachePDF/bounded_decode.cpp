#include "CBookCachePDF.h"

#include <qpdf/Pipeline.hh>
#include <qpdf/QPDF.hh>
#include <qpdf/QPDFExc.hh>
#include <qpdf/QPDFObjectHandle.hh>

#include <exception>
#include <memory>
#include <new>
#include <string>

namespace {

/// Thrown by the counter to stop a decoding that passed its bound.
struct OverLimit : std::exception {
    const char *what() const noexcept override { return "decoded past its bound"; }
};

/// The end of the decoding pipeline: counts the bytes and drops them.
class Counter : public Pipeline {
  public:
    Counter(unsigned long long limit) : Pipeline("bookcache counter", nullptr), limit(limit) {}
    void write(unsigned char const *, size_t length) override {
        count += length;
        if (count > limit) {
            over = true;
            throw OverLimit();
        }
    }
    void finish() override {}
    unsigned long long count = 0;
    unsigned long long limit;
    bool over = false;
};

struct Decoder {
    std::shared_ptr<QPDF> qpdf;
    std::string message;
    std::string warnings;
};

} // namespace

extern "C" void *bookcache_pdf_decoder_new(const void *bytes, unsigned long long count) {
    try {
        auto decoder = std::make_unique<Decoder>();
        decoder->qpdf = QPDF::create();
        decoder->qpdf->setSuppressWarnings(true);
        decoder->qpdf->setAttemptRecovery(true);
        decoder->qpdf->processMemoryFile("book", static_cast<char const *>(bytes), count);
        // What reading said was said by the first reading already.
        decoder->qpdf->getWarnings();
        return decoder.release();
    } catch (...) {
        return nullptr;
    }
}

extern "C" int bookcache_pdf_decode(void *opaque, int objid, int generation, int level, unsigned long long ratio,
                                    unsigned long long floor, unsigned long long cap, unsigned long long *stored,
                                    unsigned long long *produced, const char **message, const char **warnings) {
    auto decoder = static_cast<Decoder *>(opaque);
    decoder->message.clear();
    decoder->warnings.clear();
    *message = decoder->message.c_str();
    *warnings = decoder->warnings.c_str();
    *produced = 0;
    *stored = 0;
    Counter counter(cap);
    int verdict = 0;
    try {
        QPDFObjectHandle stream = decoder->qpdf->getObject(objid, generation);
        if (!stream.isStream()) return 3;
        // Its stored bytes, counted (and dropped) first: its bound follows from them.
        Counter raw(~0ULL);
        stream.pipeStreamData(&raw, nullptr, 0, qpdf_dl_none, true, false);
        decoder->qpdf->getWarnings();
        *stored = raw.count;
        unsigned long long bound = raw.count > ~0ULL / (ratio ? ratio : 1) ? ~0ULL : raw.count * ratio;
        if (bound < floor) bound = floor;
        if (bound > cap) bound = cap;
        counter.limit = bound;
        auto decodeLevel = level >= 2 ? qpdf_dl_specialized : qpdf_dl_generalized;
        bool attempted = false;
        bool whole = stream.pipeStreamData(&counter, &attempted, 0, decodeLevel, false, false);
        if (counter.over) {
            verdict = 1;
        } else if (!whole) {
            verdict = 2;
        } else if (!attempted) {
            // Not a filter qpdf decodes at this level (an image codec): taken as stored.
            verdict = 3;
        }
    } catch (std::bad_alloc &) {
        decoder->message = "std::bad_alloc";
        verdict = 2;
    } catch (std::exception &error) {
        if (counter.over) {
            verdict = 1;
        } else {
            decoder->message = error.what();
            verdict = 2;
        }
    }
    for (auto &warning : decoder->qpdf->getWarnings()) {
        std::string text = warning.getMessageDetail();
        if (verdict == 2 && decoder->message.empty() && text.find("error decoding stream data") != std::string::npos) {
            decoder->message = text;
            continue;
        }
        if (text.find(OverLimit().what()) != std::string::npos) continue;
        if (!decoder->warnings.empty()) decoder->warnings += "\n";
        decoder->warnings += text;
    }
    if (verdict == 2 && decoder->message.empty()) decoder->message = "its data cannot be decoded";
    *produced = counter.count;
    *message = decoder->message.c_str();
    *warnings = decoder->warnings.c_str();
    return verdict;
}

extern "C" void bookcache_pdf_decoder_free(void *decoder) {
    delete static_cast<Decoder *>(decoder);
}
