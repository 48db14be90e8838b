// ming_hls_stream.h -- ming's C-simulation stand-in for Vitis HLS's <hls_stream.h>.
//
// ming_stream.h includes it when MING_CSIM is defined (`ming csim` and the tests compile with
// -DMING_CSIM) and includes Vitis's <hls_stream.h> otherwise, so Vitis csim, cosim and synthesis
// always use the real header. Its own name cannot shadow a Vitis header on any include path.
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
// Concurrent mode (compile with -DMING_CSIM_CONCURRENT -pthread): every dataflow process
// runs on its own thread (ming_csim::dataflow, called by the generated code instead of the
// plain sequential calls) and hls::stream<T, DEPTH> is a thread-safe FIFO of capacity DEPTH:
// write blocks while it holds DEPTH elements, read blocks while it is empty.  hls::stream<T>
// (DEPTH 0: ports, testbench streams) is unbounded, so its writers never block.  This sees
// what sequential C simulation cannot: a design that deadlocks because a FIFO is too shallow.
// A watchdog thread reports a deadlock when every live process is blocked on a FIFO and no
// read or write has completed for MING_CSIM_DEADLOCK_SECONDS (default 1) seconds: it prints
//     deadlock: every process is blocked
//       <process> waits to <read from|write to> <stream> (<empty|full>, <n>/<depth>)
// (one line per blocked process) to stderr and ends the program with std::_Exit(3).
//
// All element traffic goes through the primitives of ming_csim::fifo<T> (try_push /
// try_pop / blocking_push / blocking_pop / size / full / capacity); each mode has its own
// fifo<T>, stream<T>'s API is the same in both.
//
// Port check (compile with -DMING_CHECK_PORTS, either mode): every completed read and write is noted
// to ming_check.h, which allows one of each per iteration of a pipelined loop.
//
// Stream trace (compile with -DMING_TRACE_STREAMS, default mode only; `ming csim --trace`): with the
// environment variable MING_TRACE_FILE naming a file, every token written to a stream is kept, and a
// stream's tokens are appended to that file as one block when the stream is destroyed, or when the
// program aborts (a read of an empty stream, a register out of range) for the streams still alive.
// The file is the 8 bytes "MINGTRC1", then blocks, integers in host byte order:
//     uint32 name bytes, the stream's name, uint32 bytes per token, uint64 tokens, the tokens in write order
// Only element types whose bytes are their value are recorded (ming::Pack<L>: its L int8 lanes; not the
// AXI word, which has padding bytes).
#ifndef MING_HLS_STREAM_H
#define MING_HLS_STREAM_H

#if !defined(MING_CSIM)
#error "ming_hls_stream.h is the C-simulation stand-in of `ming csim`: compile with -DMING_CSIM"
#endif

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <string>

#if defined(MING_CHECK_PORTS)
#include "ming_check.h"
#endif

#if defined(MING_TRACE_STREAMS)
#if defined(MING_CSIM_CONCURRENT)
#error "MING_TRACE_STREAMS records the sequential C-simulation: compile without MING_CSIM_CONCURRENT"
#endif
#include <algorithm>
#include <csignal>
#include <cstdint>
#include <type_traits>
#include <vector>
#endif

#if defined(MING_CSIM_CONCURRENT)
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace ming_csim {

inline bool check_leftover_enabled() {
    const char* e = std::getenv("MING_CSIM_CHECK_LEFTOVER");
    return e != nullptr && std::strcmp(e, "1") == 0;
}

#if !defined(MING_CSIM_CONCURRENT)

// Storage of one stream.  Default mode: unbounded, not thread-safe (the capacity is ignored).
template <typename T>
class fifo {
public:
    explicit fifo(std::size_t /*capacity*/ = 0) {}
    void set_label(const char* /*stream name*/) {}

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
    // Returns false iff the write can never complete; never in the unbounded model.
    bool blocking_push(const T& v) {
        q_.push_back(v);
        return true;
    }
    // Returns false iff the read can never complete.  Unbounded single-threaded FIFO:
    // nobody can fill an empty stream while we wait, so empty -> false (deadlock).
    bool blocking_pop(T& out) { return try_pop(out); }
    std::size_t size() const { return q_.size(); }
    bool full() const { return false; }
    std::size_t capacity() const { return std::numeric_limits<std::size_t>::max(); }

private:
    std::deque<T> q_;
};

using counter = std::size_t;

#else  // MING_CSIM_CONCURRENT

constexpr std::size_t kUnbounded = std::numeric_limits<std::size_t>::max();

enum class wait_kind { none, read, write };

// One dataflow process: its thread's bookkeeping, read by the deadlock watchdog.
struct process_state {
    explicit process_state(const char* process_name) : name(process_name) {}
    const std::string name;
    std::atomic<std::uint64_t> progress{0};  // completed reads + writes of this process
    // Guarded by monitor::mutex.
    bool running = true;  // the body has not returned yet
    int regions = 0;      // > 0: runs a nested dataflow region (only joins its children)
    wait_kind waiting = wait_kind::none;
    const char* stream = "";  // what it waits for (valid while waiting)
    std::size_t size = 0;
    std::size_t capacity = 0;
};

// The process running on this thread (nullptr: not a dataflow process, e.g. the testbench).
inline process_state*& current_process() {
    thread_local process_state* self = nullptr;
    return self;
}

// Registry of the live processes and the deadlock watchdog.  Lock order: a fifo's mutex,
// then monitor::mutex (the watchdog only ever takes the latter).
class monitor {
public:
    static monitor& instance() {
        static monitor m;
        return m;
    }

    std::mutex mutex;
    std::vector<process_state*> processes;         // registration order
    int regions = 0;                               // dataflow regions running
    std::atomic<std::uint64_t> outside_progress{0};  // reads / writes by non-process threads

    // Called with `mutex` held when the first region starts.
    void start_watchdog() {
        ++generation_;
        watchdog_ = std::thread(&monitor::watch, this, generation_);
    }
    // Called with `mutex` held when the last region ends: the thread to join (after unlocking).
    std::thread stop_watchdog() {
        wake_.notify_all();
        return std::move(watchdog_);
    }

    void note_progress() {
        process_state* self = current_process();
        if (self != nullptr) {
            self->progress.fetch_add(1, std::memory_order_relaxed);
        } else {
            outside_progress.fetch_add(1, std::memory_order_relaxed);
        }
    }

    // The calling process now waits (or stops waiting: kind none) on `stream`.
    void set_waiting(wait_kind kind, const char* stream, std::size_t size, std::size_t capacity) {
        process_state* self = current_process();
        if (self == nullptr) return;
        std::lock_guard<std::mutex> lock(mutex);
        self->waiting = kind;
        self->stream = stream;
        self->size = size;
        self->capacity = capacity;
    }

private:
    static double deadlock_seconds() {
        const char* e = std::getenv("MING_CSIM_DEADLOCK_SECONDS");
        if (e == nullptr || *e == '\0') return 1.0;
        char* end = nullptr;
        const double seconds = std::strtod(e, &end);
        return (end != e && seconds > 0) ? seconds : 1.0;
    }

    // Deadlock: at least one live process, every live process blocked on a FIFO, and no
    // read / write completed anywhere, continuously for deadlock_seconds().
    void watch(unsigned generation) {
        using clock = std::chrono::steady_clock;
        const auto limit = std::chrono::duration<double>(deadlock_seconds());
        std::unique_lock<std::mutex> lock(mutex);
        std::uint64_t last_progress = ~std::uint64_t{0};
        auto stable_since = clock::now();
        while (regions > 0 && generation == generation_) {
            wake_.wait_for(lock, std::chrono::milliseconds(20));
            if (regions == 0 || generation != generation_) break;
            std::uint64_t progress = outside_progress.load(std::memory_order_relaxed);
            bool any_live = false, all_blocked = true;
            for (const process_state* p : processes) {
                progress += p->progress.load(std::memory_order_relaxed);
                if (!p->running || p->regions > 0) continue;
                any_live = true;
                if (p->waiting == wait_kind::none) all_blocked = false;
            }
            const auto now = clock::now();
            if (!any_live || !all_blocked || progress != last_progress) {
                last_progress = progress;
                stable_since = now;
            } else if (now - stable_since >= limit) {
                report_and_exit();
            }
        }
    }

    [[noreturn]] void report_and_exit() const {
        std::fprintf(stderr, "deadlock: every process is blocked\n");
        for (const process_state* p : processes) {
            if (!p->running || p->regions > 0 || p->waiting == wait_kind::none) continue;
            const bool read = p->waiting == wait_kind::read;
            if (p->capacity == kUnbounded) {
                std::fprintf(stderr, "  %s waits to %s %s (%s, %zu/unbounded)\n", p->name.c_str(),
                             read ? "read from" : "write to", p->stream, read ? "empty" : "full", p->size);
            } else {
                std::fprintf(stderr, "  %s waits to %s %s (%s, %zu/%zu)\n", p->name.c_str(),
                             read ? "read from" : "write to", p->stream, read ? "empty" : "full", p->size,
                             p->capacity);
            }
        }
        std::fflush(stderr);
        std::_Exit(3);
    }

    std::condition_variable wake_;
    std::thread watchdog_;
    unsigned generation_ = 0;
};

// Storage of one stream.  Concurrent mode: thread-safe, bounded by `capacity` (0: unbounded);
// blocking_push / blocking_pop wait on not_full / not_empty condition variables.
template <typename T>
class fifo {
public:
    explicit fifo(std::size_t capacity = 0) : capacity_(capacity == 0 ? kUnbounded : capacity) {}
    void set_label(const char* stream_name) { label_ = stream_name; }

    bool try_push(const T& v) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (q_.size() >= capacity_) return false;
        push_locked(lock, v);
        return true;
    }
    bool try_pop(T& out) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (q_.empty()) return false;
        pop_locked(lock, out);
        return true;
    }
    // Returns false iff the write can never complete: full, and no dataflow region runs.
    bool blocking_push(const T& v) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (q_.size() >= capacity_) {
            if (!may_wait()) return false;
            wait(lock, not_full_, writers_waiting_, wait_kind::write, [this] { return q_.size() < capacity_; });
        }
        push_locked(lock, v);
        return true;
    }
    // Returns false iff the read can never complete: empty, and no dataflow region runs.
    bool blocking_pop(T& out) {
        std::unique_lock<std::mutex> lock(mutex_);
        if (q_.empty()) {
            if (!may_wait()) return false;
            wait(lock, not_empty_, readers_waiting_, wait_kind::read, [this] { return !q_.empty(); });
        }
        pop_locked(lock, out);
        return true;
    }
    std::size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return q_.size();
    }
    bool full() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return q_.size() >= capacity_;
    }
    std::size_t capacity() const { return capacity_; }

private:
    // A dataflow process may always wait; another thread only while some region runs.
    static bool may_wait() {
        if (current_process() != nullptr) return true;
        monitor& m = monitor::instance();
        std::lock_guard<std::mutex> lock(m.mutex);
        return m.regions > 0;
    }

    template <typename Ready>
    void wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, int& waiters, wait_kind kind,
              Ready ready) {
        monitor& m = monitor::instance();
        m.set_waiting(kind, label_, q_.size(), capacity_);
        ++waiters;
        cv.wait(lock, ready);
        --waiters;
        m.set_waiting(wait_kind::none, "", 0, 0);
    }

    void push_locked(std::unique_lock<std::mutex>& lock, const T& v) {
        q_.push_back(v);
        const bool wake = readers_waiting_ > 0;
        lock.unlock();
        monitor::instance().note_progress();
        if (wake) not_empty_.notify_one();
    }
    void pop_locked(std::unique_lock<std::mutex>& lock, T& out) {
        out = q_.front();
        q_.pop_front();
        const bool wake = writers_waiting_ > 0;
        lock.unlock();
        monitor::instance().note_progress();
        if (wake) not_full_.notify_one();
    }

    mutable std::mutex mutex_;
    std::condition_variable not_empty_, not_full_;
    std::deque<T> q_;
    const std::size_t capacity_;
    const char* label_ = "unnamed";
    int readers_waiting_ = 0;
    int writers_waiting_ = 0;
};

using counter = std::atomic<std::size_t>;

// One process of a dataflow region: a name for reports and the call to run.
struct process {
    const char* name;
    std::function<void()> body;
};

// Runs every process of a dataflow region on its own thread and joins them.  Regions nest
// (a process may itself run a region); the first region starts the deadlock watchdog.
inline void dataflow(std::initializer_list<process> region) {
    monitor& m = monitor::instance();
    process_state* parent = current_process();
    std::vector<std::unique_ptr<process_state>> states;
    for (const process& p : region) states.emplace_back(new process_state(p.name));
    {
        std::lock_guard<std::mutex> lock(m.mutex);
        if (parent != nullptr) ++parent->regions;
        for (const auto& s : states) m.processes.push_back(s.get());
        if (m.regions++ == 0) m.start_watchdog();
    }
    std::vector<std::thread> threads;
    threads.reserve(region.size());
    std::size_t i = 0;
    for (const process& p : region) {
        process_state* state = states[i++].get();
        const std::function<void()>* body = &p.body;
        threads.emplace_back([&m, state, body] {
            current_process() = state;
            (*body)();
#if defined(MING_CHECK_PORTS)
            ming_check::finish();
#endif
            std::lock_guard<std::mutex> lock(m.mutex);
            state->running = false;
        });
    }
    for (std::thread& t : threads) t.join();
    std::thread watchdog;
    {
        std::lock_guard<std::mutex> lock(m.mutex);
        for (const auto& s : states) {
            for (auto it = m.processes.begin(); it != m.processes.end(); ++it) {
                if (*it == s.get()) {
                    m.processes.erase(it);
                    break;
                }
            }
        }
        if (parent != nullptr) --parent->regions;
        if (--m.regions == 0) watchdog = m.stop_watchdog();
    }
    if (watchdog.joinable()) watchdog.join();
}

#endif  // MING_CSIM_CONCURRENT

#if defined(MING_TRACE_STREAMS)
// The tokens written to one stream, kept until they are appended to the trace file (see the top).
class stream_trace {
public:
    explicit stream_trace(const std::string* name) : name_(name) {
        if (file() != nullptr) live().push_back(this);
    }
    ~stream_trace() {
        flush();
        std::vector<stream_trace*>& all = live();
        all.erase(std::remove(all.begin(), all.end(), this), all.end());
    }
    stream_trace(const stream_trace&) = delete;
    stream_trace& operator=(const stream_trace&) = delete;

    void note(const void* token, std::size_t bytes) {
        if (file() == nullptr) return;
        const unsigned char* first = static_cast<const unsigned char*>(token);
        token_bytes_ = bytes;
        tokens_.insert(tokens_.end(), first, first + bytes);
    }

    // Appends the tokens kept so far to the file as one block.
    void flush() {
        std::FILE* out = file();
        if (out == nullptr || tokens_.empty()) return;
        const std::uint32_t name_bytes = static_cast<std::uint32_t>(name_->size());
        const std::uint32_t token_bytes = static_cast<std::uint32_t>(token_bytes_);
        const std::uint64_t count = tokens_.size() / token_bytes_;
        std::fwrite(&name_bytes, sizeof name_bytes, 1, out);
        std::fwrite(name_->data(), 1, name_bytes, out);
        std::fwrite(&token_bytes, sizeof token_bytes, 1, out);
        std::fwrite(&count, sizeof count, 1, out);
        std::fwrite(tokens_.data(), 1, tokens_.size(), out);
        std::fflush(out);  // std::abort does not flush stdio
        tokens_.clear();
    }

private:
    static std::vector<stream_trace*>& live() {
        static std::vector<stream_trace*> all;
        return all;
    }
    static std::FILE* file() {
        static std::FILE* out = open_file();
        return out;
    }
    static std::FILE* open_file() {
        const char* path = std::getenv("MING_TRACE_FILE");
        if (path == nullptr || *path == '\0') return nullptr;
        std::FILE* out = std::fopen(path, "wb");
        if (out == nullptr) {
            std::fprintf(stderr, "ERROR [ming csim]: cannot write the stream trace %s\n", path);
            std::exit(1);
        }
        std::fwrite("MINGTRC1", 1, 8, out);
        std::signal(SIGABRT, on_abort);
        return out;
    }
    // An abort ends the program without destroying the streams: their tokens so far go to the file first.
    static void on_abort(int signal_number) {
        for (stream_trace* trace : live()) trace->flush();
        std::signal(signal_number, SIG_DFL);
        std::raise(signal_number);
    }

    const std::string* name_;
    std::size_t token_bytes_ = 0;
    std::vector<unsigned char> tokens_;
};
#endif  // MING_TRACE_STREAMS

}  // namespace ming_csim

namespace hls {

template <typename T, int DEPTH = 0>
class stream;

template <typename T>
class stream<T, 0> {
public:
    using value_type = T;

    stream() : stream("unnamed", 0) {}
    stream(const char* name) : stream(name, 0) {}  // NOLINT: implicit, as Vitis

    stream(const stream&) = delete;
    stream& operator=(const stream&) = delete;

    ~stream() {
        const std::size_t left = fifo_.size();
        if (left != 0 && ming_csim::check_leftover_enabled()) {
            std::fprintf(stderr,
                         "WARNING [ming csim]: hls::stream '%s' destroyed with %zu leftover "
                         "element(s) (%zu reads, %zu writes)\n",
                         name_.c_str(), left, reads(), writes());
        }
    }

    // Blocking write (never blocks in the unbounded model).
    void write(const T& v) {
        if (!fifo_.blocking_push(v)) die_write_full();
        ++writes_;
        note_access(true);
        note_written(v);
    }
    // Blocking read; empty stream -> error naming the stream + std::abort().
    T read() {
        T v{};
        if (!fifo_.blocking_pop(v)) die_read_empty();
        ++reads_;
        note_access(false);
        return v;
    }
    void read(T& out) { out = read(); }

    // Non-blocking read: false (and `out` untouched) if empty.
    bool read_nb(T& out) {
        if (!fifo_.try_pop(out)) return false;
        ++reads_;
        note_access(false);
        return true;
    }
    // Non-blocking write: false (nothing written) if full; never full in the unbounded model.
    bool write_nb(const T& v) {
        if (!fifo_.try_push(v)) return false;
        ++writes_;
        note_access(true);
        note_written(v);
        return true;
    }

    void operator<<(const T& v) { write(v); }
    void operator>>(T& out) { read(out); }

    bool empty() const { return fifo_.size() == 0; }
    bool full() const { return fifo_.full(); }
    std::size_t size() const { return fifo_.size(); }
    std::size_t capacity() const { return fifo_.capacity(); }

    void set_name(const char* name) {
        name_ = name != nullptr ? name : "unnamed";
        fifo_.set_label(name_.c_str());
    }

    // ming extras (not in Vitis): debugging / test hooks.
    const char* name() const { return name_.c_str(); }
    std::size_t reads() const { return reads_; }
    std::size_t writes() const { return writes_; }

protected:
    // hls::stream<T, DEPTH>: capacity DEPTH in concurrent mode, ignored otherwise.
    stream(const char* name, std::size_t depth) : name_(name != nullptr ? name : "unnamed"), fifo_(depth) {
        fifo_.set_label(name_.c_str());
    }

private:
    void note_access(bool write) const {
#if defined(MING_CHECK_PORTS)
        ports_.note(write);
#else
        (void)write;
#endif
    }
    void note_written(const T& v) {
#if defined(MING_TRACE_STREAMS)
        if constexpr (std::has_unique_object_representations<T>::value) trace_.note(&v, sizeof(T));
#else
        (void)v;
#endif
    }

    [[noreturn]] void die_read_empty() const {
        std::fprintf(stderr,
                     "ERROR [ming csim]: hls::stream '%s' read while empty "
                     "(%zu reads, %zu writes so far): producer/consumer count mismatch\n",
                     name_.c_str(), reads(), writes());
        std::fflush(stderr);
        std::abort();
    }
    [[noreturn]] void die_write_full() const {
        std::fprintf(stderr,
                     "ERROR [ming csim]: hls::stream '%s' written while full (%zu/%zu) outside a "
                     "dataflow region (%zu reads, %zu writes so far)\n",
                     name_.c_str(), fifo_.size(), fifo_.capacity(), reads(), writes());
        std::fflush(stderr);
        std::abort();
    }

    std::string name_;
#if defined(MING_TRACE_STREAMS)
    ming_csim::stream_trace trace_{&name_};
#endif
#if defined(MING_CHECK_PORTS)
    ming_check::StreamPorts ports_{&name_};  // one read and one write per pipelined iteration
#endif
    ming_csim::fifo<T> fifo_;
    ming_csim::counter reads_{0};   // std::atomic in concurrent mode (reader and writer threads)
    ming_csim::counter writes_{0};
};

// hls::stream<T, DEPTH>: a FIFO of DEPTH elements.  Default mode ignores the depth (as Vitis
// C simulation: unbounded); concurrent mode bounds the FIFO by it.  Derives from stream<T>
// so it binds to `hls::stream<T>&` parameters.
template <typename T, int DEPTH>
class stream : public stream<T, 0> {
    static_assert(DEPTH > 0, "hls::stream depth must be positive");

public:
    stream() : stream<T, 0>("unnamed", DEPTH) {}
    stream(const char* name) : stream<T, 0>(name, DEPTH) {}  // NOLINT: implicit, as Vitis
};

}  // namespace hls

#endif  // MING_HLS_STREAM_H
