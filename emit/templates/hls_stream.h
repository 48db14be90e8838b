// hls_stream.h -- ming's C-simulation stand-in for Vitis HLS's <hls_stream.h>.
//
// Generated code includes it as
//     #ifdef __SYNTHESIS__
//     #include <hls_stream.h>      // the real Vitis header
//     #else
//     #include "hls_stream.h"      // this file, copied next to the generated sources
//     #endif
// so it is only used for software builds (tests, g++, Vitis csim).
//
// API: the subset of Vitis's hls::stream that ming emits -- default / named constructor,
// write, read (both forms), read_nb, write_nb, empty, full, size, capacity, set_name,
// operator<< / operator>>, hls::stream<T, DEPTH> deriving from hls::stream<T> (as Vitis);
// non-copyable.  Extras for tests: name(), reads(), writes().
//
// Semantics (default mode): unbounded FIFO (std::deque), single-threaded, like Vitis
// C simulation.  Reading an empty stream prints an error naming the stream to stderr and
// calls std::abort() (a producer/consumer count mismatch; Vitis csim reports it too).
// If the environment variable MING_CSIM_CHECK_LEFTOVER is "1", the destructor warns
// (stderr) about a stream destroyed with unread data.
//
// Extension point: MING_CSIM_CONCURRENT (bounded FIFO of capacity DEPTH, thread-safe,
// blocking read/write, for running dataflow processes as threads) is reserved, not
// implemented.  All element traffic goes through the primitives of ming_csim::fifo<T>
// (try_push / try_pop / blocking_push / blocking_pop / size / full / capacity); the
// concurrent mode is a second fifo<T> (mutex + not_empty / not_full condition variables,
// capacity from DEPTH or a default, blocking_pop returning false on deadlock detection)
// selected by the macro, plus atomic read/write counters; stream<T>'s API does not change.
#ifndef MING_HLS_STREAM_H
#define MING_HLS_STREAM_H

#if defined(__SYNTHESIS__)
// Never synthesize this model: defer to the real header if we were picked up by mistake.
#include_next <hls_stream.h>
#elif defined(X_HLS_STREAM_SIM_H)
// Vitis's own simulation model is already included (e.g. via ap_axi_sdata.h): keep it,
// two definitions of hls::stream cannot coexist.  The ming extras are then unavailable.
#else
// Also makes a later #include of Vitis's simulation hls_stream.h a no-op.
#define X_HLS_STREAM_SIM_H

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <string>

#if defined(MING_CSIM_CONCURRENT)
#error "MING_CSIM_CONCURRENT (bounded, thread-safe hls::stream) is not implemented yet"
#endif

namespace ming_csim {

// Storage of one stream.  Default mode: unbounded, not thread-safe.
// (MING_CSIM_CONCURRENT: same members, guarded by a std::mutex, bounded by `capacity`,
// with not_empty / not_full condition variables behind blocking_push / blocking_pop.)
template <typename T>
class fifo {
public:
    bool try_push(const T& v) {
        q_.push_back(v);
        return true;
    }
    bool try_pop(T& out) {
        if (q_.empty()) return false;
        out = q_.front();
        q_.pop_front();
        return true;
    }
    void blocking_push(const T& v) { q_.push_back(v); }
    // Returns false iff the read can never complete.  Unbounded single-threaded FIFO:
    // nobody can fill an empty stream while we wait, so empty -> false (deadlock).
    bool blocking_pop(T& out) { return try_pop(out); }
    std::size_t size() const { return q_.size(); }
    bool full() const { return false; }
    std::size_t capacity() const { return std::numeric_limits<std::size_t>::max(); }

private:
    std::deque<T> q_;
};

inline bool check_leftover_enabled() {
    const char* e = std::getenv("MING_CSIM_CHECK_LEFTOVER");
    return e != nullptr && std::strcmp(e, "1") == 0;
}

}  // namespace ming_csim

namespace hls {

template <typename T, int DEPTH = 0>
class stream;

template <typename T>
class stream<T, 0> {
public:
    using value_type = T;

    stream() : name_("unnamed") {}
    stream(const char* name) : name_(name != nullptr ? name : "unnamed") {}  // NOLINT: implicit, as Vitis

    stream(const stream&) = delete;
    stream& operator=(const stream&) = delete;

    ~stream() {
        const std::size_t left = fifo_.size();
        if (left != 0 && ming_csim::check_leftover_enabled()) {
            std::fprintf(stderr,
                         "WARNING [ming csim]: hls::stream '%s' destroyed with %zu leftover "
                         "element(s) (%zu reads, %zu writes)\n",
                         name_.c_str(), left, reads_, writes_);
        }
    }

    // Blocking write (never blocks in the unbounded model).
    void write(const T& v) {
        fifo_.blocking_push(v);
        ++writes_;
    }
    // Blocking read; empty stream -> error naming the stream + std::abort().
    T read() {
        T v{};
        if (!fifo_.blocking_pop(v)) die_read_empty();
        ++reads_;
        return v;
    }
    void read(T& out) { out = read(); }

    // Non-blocking read: false (and `out` untouched) if empty.
    bool read_nb(T& out) {
        if (!fifo_.try_pop(out)) return false;
        ++reads_;
        return true;
    }
    // Non-blocking write: false (nothing written) if full; never full in this model.
    bool write_nb(const T& v) {
        if (!fifo_.try_push(v)) return false;
        ++writes_;
        return true;
    }

    void operator<<(const T& v) { write(v); }
    void operator>>(T& out) { read(out); }

    bool empty() const { return fifo_.size() == 0; }
    bool full() const { return fifo_.full(); }
    std::size_t size() const { return fifo_.size(); }
    std::size_t capacity() const { return fifo_.capacity(); }

    void set_name(const char* name) { name_ = name != nullptr ? name : "unnamed"; }

    // ming extras (not in Vitis): debugging / test hooks.
    const char* name() const { return name_.c_str(); }
    std::size_t reads() const { return reads_; }
    std::size_t writes() const { return writes_; }

private:
    [[noreturn]] void die_read_empty() const {
        std::fprintf(stderr,
                     "ERROR [ming csim]: hls::stream '%s' read while empty "
                     "(%zu reads, %zu writes so far): producer/consumer count mismatch\n",
                     name_.c_str(), reads_, writes_);
        std::fflush(stderr);
        std::abort();
    }

    // (MING_CSIM_CONCURRENT: the counters become std::atomic<std::size_t>.)
    std::string name_;
    ming_csim::fifo<T> fifo_;
    std::size_t reads_ = 0;
    std::size_t writes_ = 0;
};

// hls::stream<T, DEPTH>: the depth is a synthesis hint; C simulation ignores it (as
// Vitis).  Derives from stream<T> so it binds to `hls::stream<T>&` parameters.
template <typename T, int DEPTH>
class stream : public stream<T, 0> {
public:
    stream() : stream<T, 0>() {}
    stream(const char* name) : stream<T, 0>(name) {}  // NOLINT: implicit, as Vitis
};

}  // namespace hls

#endif  // __SYNTHESIS__ / X_HLS_STREAM_SIM_H
#endif  // MING_HLS_STREAM_H
