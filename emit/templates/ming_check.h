// ming_check.h -- the C-simulation port check: compiled with -DMING_CHECK_PORTS (never for synthesis),
// the generated C++ stops with a report when one iteration of a pipelined loop needs more memory ports
// than the arrays' partition and storage pragmas provide, or uses a stream twice.
//
// ming_stream.h turns, in this mode,
//   HLS_PRAGMA(x)            into a Pragma object (MING_CHECK_PRAGMA): PIPELINE opens an iteration that
//                            lasts until the object dies at the end of the loop body; ARRAY_PARTITION,
//                            ARRAY_RESHAPE and BIND_STORAGE attach a layout to the array they name;
//                            any other pragma does nothing;
//   ming::Array<T, N...>     into Array<T, N...>: zero-initialised storage whose subscripts record the
//                            bank and address of every element read or written.
// The weights header wraps its constant tables in Rom<T, N...> views of the same names, and
// ming_hls_stream.h notes every stream read and write (StreamPorts).
//
// A pragma `variable=NAME` names the ROM view NAME if there is one, else the array declared last in
// this thread (declare each array right before its pragmas); a later pragma may name it again. Local
// arrays must not be static (each call of a process declares and names them anew), and their elements
// are scalars, read by conversion and written by assignment (`x = a[i]`, `a[i] += x`, `f(a[i])`).
//
// Per iteration, every bank of every array may see at most as many distinct addresses (reads and
// writes counted apart) as its storage has ports, and every stream at most one read and one write.
// An access is counted on every bank its site may reach, as Vitis HLS schedules it: a site is a source
// line and the n-th access from it in an iteration (one copy of an unrolled loop; accesses in unrolled
// loops must therefore not be conditional), and a site that has reached several banks of a partitioned
// dimension selects among them at run time, which takes a port of each.
// Accesses outside pipelined loops are not counted; a bank of a single word is a register, unlimited.
// The first violation prints one line to stderr and ends the program with exit code 3:
//   ming port check: <function> <array or stream> <file>:<line> <detail>
// where file:line is the PIPELINE pragma's, e.g.
//   ming port check: conv1 line_buffer tiny_cnn.cpp:57 3 accesses (3 reads, 0 writes) per iteration
//   to bank (0,1), 2 ports
// State is per thread, so the concurrent C-simulation (one thread per process) is checked too.
// Compiled with -DMING_TRACE_TOKENS as well, every stream read and write in a pipelined loop prints
//   ming trace: <function> <stream> <read|write> <iteration of the loop in this thread, from 0>
// so that a test can compare when each token moves with the loop's description (ming_py/process_spec.py).
#ifndef MING_CHECK_H
#define MING_CHECK_H

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace ming_check {

constexpr int kMaxRank = 5;
constexpr int kConflictExitCode = 3;

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------------------------------------------
// Layouts: how Vitis HLS maps one dimension's index to a bank coordinate and an address coordinate.

enum class Layout : std::uint8_t { whole, partition, reshape };  // whole: no pragma on the dimension
enum class Split : std::uint8_t { complete, cyclic, block };

struct DimensionLayout {
  Layout layout = Layout::whole;
  Split split = Split::complete;
  int factor = 1;

  bool operator==(const DimensionLayout& other) const {
    return layout == other.layout && split == other.split && factor == other.factor;
  }
  bool operator!=(const DimensionLayout& other) const { return !(*this == other); }

  // A block holds ceil(n / factor) consecutive indices.
  int block_size(int n) const { return ceil_div(n, factor); }

  int banks(int n) const {
    if (layout != Layout::partition) return 1;
    switch (split) {
      case Split::complete: return n;
      case Split::cyclic: return std::min(factor, n);
      case Split::block: return ceil_div(n, block_size(n));
    }
    return 1;
  }
  // Reshaping packs the split-off indices into one wider word: they share an address.
  int addresses(int n) const {
    if (layout == Layout::whole) return n;
    return split == Split::complete ? 1 : block_size(n);
  }
  int bank_of(int i, int n) const {
    if (layout != Layout::partition) return 0;
    switch (split) {
      case Split::complete: return i;
      case Split::cyclic: return i % factor;
      case Split::block: return i / block_size(n);
    }
    return 0;
  }
  int address_of(int i, int n) const {
    if (layout == Layout::whole) return i;
    switch (split) {
      case Split::complete: return 0;
      case Split::cyclic: return i / factor;
      case Split::block: return i % block_size(n);
    }
    return 0;
  }
};

// The ports of a bank, from BIND_STORAGE's type.
enum class Ports : std::uint8_t { two, one, one_read_one_write };

inline Ports ports_of_storage(const std::string& type) {
  if (type.size() >= 3 && type.compare(type.size() - 3, 3, "_1p") == 0) return Ports::one;
  if (type == "ram_s2p") return Ports::one_read_one_write;
  return Ports::two;
}

// ---------------------------------------------------------------------------------------------------
// Reporting.

inline const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// Where a pragma is, for reports.
struct Site {
  const char* text;
  const char* function;
  const char* file;
  int line;
};

// A pragma or array used against the conventions: a bug of the generated code, not a port conflict.
[[noreturn]] inline void misuse(const Site& site, const std::string& problem) {
  std::fprintf(stderr, "ming port check: error: HLS_PRAGMA(%s) in %s at %s:%d: %s\n", site.text, site.function,
               base_name(site.file), site.line, problem.c_str());
  std::fflush(stderr);
  std::abort();
}

// One line, once: concurrent processes may find conflicts at the same time.
[[noreturn]] inline void report_conflict(const Site& loop, const std::string& resource, const std::string& detail) {
  static std::mutex reporting;
  reporting.lock();  // never unlocked: the first reporter ends the program
  std::fprintf(stderr, "ming port check: %s %s %s:%d %s\n", loop.function, resource.c_str(), base_name(loop.file),
               loop.line, detail.c_str());
  std::fflush(stderr);
  std::_Exit(kConflictExitCode);
}

// ---------------------------------------------------------------------------------------------------
// Resources: what an iteration's accesses are counted against.

// A bank as its coordinate in each dimension (0 in a dimension that is not partitioned).
using BankCoordinates = std::array<int, kMaxRank>;

// The bank coordinates one access site has reached, per dimension (sorted).
struct SiteBanks {
  std::vector<int> reached[kMaxRank];

  void add(const BankCoordinates& bank) {
    for (int d = 0; d < kMaxRank; d++) {
      std::vector<int>& r = reached[d];
      const auto at = std::lower_bound(r.begin(), r.end(), bank[d]);
      if (at == r.end() || *at != bank[d]) r.insert(at, bank[d]);
    }
  }
  bool several() const {
    return std::any_of(std::begin(reached), std::end(reached), [](const std::vector<int>& r) { return r.size() > 1; });
  }
};

class Resource {
 public:
  virtual ~Resource() = default;
  virtual std::string name() const = 0;
  // " to bank (0,1)" for a partitioned array; empty when there is one bank.
  virtual std::string bank_text(std::int64_t bank) const = 0;
  // The bank numbers of every combination of the reached coordinates.
  virtual std::vector<std::int64_t> banks_of(const SiteBanks& site) const = 0;
  Ports ports() const { return ports_; }

 protected:
  Ports ports_ = Ports::two;
};

struct Access {
  const Resource* resource;
  std::int64_t bank;
  std::int64_t address;
  bool write;
  std::uint32_t order;  // position in the iteration
  int line;  // of the access site; 0 for a stream
  BankCoordinates coordinates;
  bool run_time_bank;  // charged on a bank its site reaches at run time
};

// The accesses of one bank in one iteration, distinct addresses counted.
struct BankUse {
  const Resource* resource;
  std::int64_t bank;
  int reads;
  int writes;
  std::uint32_t first;  // order of its first access
  int run_time_line;    // a site charged here that selects its bank at run time, or 0
};

inline std::string plural(int n, const std::string& word) {
  const bool sibilant = word.back() == 's';
  return std::to_string(n) + " " + word + (n == 1 ? "" : sibilant ? "es" : "s");
}

// Empty when `use` fits the bank's ports, else what exceeds them.
inline std::string excess(const BankUse& use) {
  const std::string where = use.resource->bank_text(use.bank);
  switch (use.resource->ports()) {
    case Ports::one_read_one_write:
      if (use.reads > 1) return plural(use.reads, "read") + " per iteration" + where + ", 1 read port";
      if (use.writes > 1) return plural(use.writes, "write") + " per iteration" + where + ", 1 write port";
      return "";
    case Ports::one:
    case Ports::two: {
      const int ports = use.resource->ports() == Ports::one ? 1 : 2;
      if (use.reads + use.writes <= ports) return "";
      return plural(use.reads + use.writes, "access") + " (" + plural(use.reads, "read") + ", " +
             plural(use.writes, "write") + ") per iteration" + where + ", " + plural(ports, "port");
    }
  }
  return "";
}

inline std::string run_time_note(const BankUse& use) {
  if (use.run_time_line == 0) return "";
  return " (line " + std::to_string(use.run_time_line) + " selects its bank at run time)";
}

// ---------------------------------------------------------------------------------------------------
// Iterations: the accesses of the thread's current pipelined-loop iteration.

class Iteration {
 public:
  Iteration() = default;
  ~Iteration() { owner_ = nullptr; }  // arrays of static storage die after the thread's iteration
  Iteration(const Iteration&) = delete;
  Iteration& operator=(const Iteration&) = delete;

  bool open() const { return owner_ != nullptr; }

  // Opens an iteration unless one is open: a loop pipelined inside a pipelined loop is unrolled into it.
  bool begin(const void* owner, const Site& loop) {
    if (open()) return false;
    owner_ = owner;
    loop_ = loop;
    number_ = started_[{loop.file, loop.line}]++;
    return true;
  }

  const Site& loop() const { return loop_; }
  // The iteration's place among those of its loop in this thread, from 0.
  long long number() const { return number_; }

  void end() {
    if (!open()) return;
    widen(nullptr);
    check(nullptr);
    accesses_.clear();
    owner_ = nullptr;
  }

  void add(const Resource* resource, std::int64_t bank, std::int64_t address, bool write, int line = 0,
           const BankCoordinates& coordinates = {}) {
    accesses_.push_back(
        {resource, bank, address, write, static_cast<std::uint32_t>(accesses_.size()), line, coordinates, false});
  }

  // `resource` dies: check its accesses of an open iteration now and forget them and its sites.
  void settle(const Resource* resource) {
    if (open()) {
      widen(resource);
      check(resource);
      accesses_.erase(std::remove_if(accesses_.begin(), accesses_.end(),
                                     [resource](const Access& a) { return a.resource == resource; }),
                      accesses_.end());
    }
    sites_.erase(resource);
  }

  std::uint32_t size() const { return static_cast<std::uint32_t>(accesses_.size()); }

 private:
  // Reports the bank whose first access came earliest among those over their ports.
  void check(const Resource* only) const {
    std::vector<BankUse> uses = bank_uses(only);
    const BankUse* worst = nullptr;
    std::string worst_excess;
    for (const BankUse& use : uses) {
      std::string problem = excess(use);
      if (!problem.empty() && (worst == nullptr || use.first < worst->first)) {
        worst = &use;
        worst_excess = std::move(problem);
      }
    }
    if (worst != nullptr) report_conflict(loop_, worst->resource->name(), worst_excess + run_time_note(*worst));
  }

  // Notes the banks each array access's site reaches, and charges the access on each of them when there
  // are several.
  void widen(const Resource* only) {
    std::map<std::tuple<const Resource*, int, bool>, int> executed;  // per source line, accesses so far
    std::vector<Access> widened;
    for (const Access& a : accesses_) {
      if (a.line == 0 || (only != nullptr && a.resource != only)) {
        widened.push_back(a);
        continue;
      }
      const int nth = executed[{a.resource, a.line, a.write}]++;
      SiteBanks& site = sites_[a.resource][{a.line, a.write, nth}];
      site.add(a.coordinates);
      if (!site.several()) {
        widened.push_back(a);
        continue;
      }
      for (const std::int64_t bank : a.resource->banks_of(site)) {
        Access copy = a;
        copy.bank = bank;
        copy.run_time_bank = true;
        widened.push_back(copy);
      }
    }
    accesses_ = std::move(widened);
  }

  std::vector<BankUse> bank_uses(const Resource* only) const {
    std::vector<Access> sorted;
    for (const Access& a : accesses_) {
      if (only == nullptr || a.resource == only) sorted.push_back(a);
    }
    std::sort(sorted.begin(), sorted.end(), [](const Access& x, const Access& y) {
      if (x.resource != y.resource) return std::less<const Resource*>()(x.resource, y.resource);
      if (x.bank != y.bank) return x.bank < y.bank;
      if (x.write != y.write) return x.write < y.write;
      if (x.address != y.address) return x.address < y.address;
      return x.order < y.order;
    });
    std::vector<BankUse> uses;
    for (std::size_t i = 0; i < sorted.size(); i++) {
      const Access& a = sorted[i];
      if (uses.empty() || uses.back().resource != a.resource || uses.back().bank != a.bank) {
        uses.push_back({a.resource, a.bank, 0, 0, a.order, 0});
      }
      BankUse& use = uses.back();
      use.first = std::min(use.first, a.order);
      if (a.run_time_bank && use.run_time_line == 0) use.run_time_line = a.line;
      const bool repeated = i > 0 && sorted[i - 1].resource == a.resource && sorted[i - 1].bank == a.bank &&
                            sorted[i - 1].write == a.write && sorted[i - 1].address == a.address;
      if (!repeated) (a.write ? use.writes : use.reads)++;
    }
    return uses;
  }

  const void* owner_ = nullptr;  // the PIPELINE pragma that opened it
  Site loop_{"", "", "", 0};
  long long number_ = 0;
  std::map<std::pair<std::string, int>, long long> started_;  // iterations begun, by loop
  std::vector<Access> accesses_;
  // Per array, as long as it lives: its access sites (line, write, n-th access from the line in an
  // iteration) and the banks they have reached.
  std::map<const Resource*, std::map<std::tuple<int, bool, int>, SiteBanks>> sites_;
};

inline Iteration& current_iteration() {
  thread_local Iteration iteration;
  return iteration;
}

// Ends the thread's open iteration (the end of a process's thread).
inline void finish() { current_iteration().end(); }

// ---------------------------------------------------------------------------------------------------
// Arrays: shape, layout and name of a local array or a ROM.

class ArrayState : public Resource {
 public:
  ArrayState(std::initializer_list<int> extents, const char* declared_file, int declared_line)
      : declared_file_(declared_file), declared_line_(declared_line) {
    for (int n : extents) extent_[rank_++] = n;
    update_words();
  }
  ~ArrayState() override { current_iteration().settle(this); }

  std::string name() const override {
    if (!name_.empty()) return name_;
    return std::string("array declared at ") + base_name(declared_file_) + ":" + std::to_string(declared_line_);
  }
  std::string bank_text(std::int64_t bank) const override {
    std::vector<int> coordinates;
    for (int d = rank_ - 1; d >= 0; d--) {
      if (layout_[d].layout != Layout::partition) continue;
      const int banks = layout_[d].banks(extent_[d]);
      coordinates.insert(coordinates.begin(), static_cast<int>(bank % banks));
      bank /= banks;
    }
    if (coordinates.empty()) return "";
    std::string text = " to bank (";
    for (std::size_t i = 0; i < coordinates.size(); i++) {
      text += (i > 0 ? "," : "") + std::to_string(coordinates[i]);
    }
    return text + ")";
  }

  std::vector<std::int64_t> banks_of(const SiteBanks& site) const override {
    std::vector<std::int64_t> banks{0};
    for (int d = 0; d < rank_; d++) {
      std::vector<std::int64_t> next;
      for (const std::int64_t bank : banks) {
        for (const int coordinate : site.reached[d]) next.push_back(bank * layout_[d].banks(extent_[d]) + coordinate);
      }
      banks = std::move(next);
    }
    return banks;
  }

  const std::string& bound_name() const { return name_; }
  void bind(const std::string& name) { name_ = name; }
  int rank() const { return rank_; }
  int extent(int d) const { return extent_[d]; }
  // Single-word banks are registers: any number of accesses per cycle.
  bool registers() const { return words_per_bank_ == 1; }

  // Re-applied on every call of a process: only a change writes (ROMs are shared between threads).
  void set_layout(int d, const DimensionLayout& layout) {
    if (layout_[d] == layout) return;
    layout_[d] = layout;
    update_words();
  }
  void set_ports(Ports ports) {
    if (ports_ != ports) ports_ = ports;
  }

  // Records an access to the element at `index` from source line `line` if an iteration is open.
  void note(const int* index, bool write, int line) const {
    Iteration& iteration = current_iteration();
    if (!iteration.open() || registers()) return;
    std::int64_t bank = 0, address = 0;
    BankCoordinates coordinates{};
    for (int d = 0; d < rank_; d++) {
      const DimensionLayout& l = layout_[d];
      coordinates[d] = l.bank_of(index[d], extent_[d]);
      bank = bank * l.banks(extent_[d]) + coordinates[d];
      address = address * l.addresses(extent_[d]) + l.address_of(index[d], extent_[d]);
    }
    iteration.add(this, bank, address, write, line, coordinates);
  }

  // This thread's local arrays, the one declared last first (pragmas name them).
  ArrayState* older = nullptr;

 private:
  void update_words() {
    words_per_bank_ = 1;
    for (int d = 0; d < rank_; d++) words_per_bank_ *= layout_[d].addresses(extent_[d]);
  }

  int rank_ = 0;
  int extent_[kMaxRank] = {};
  DimensionLayout layout_[kMaxRank];
  std::int64_t words_per_bank_ = 1;
  std::string name_;
  const char* declared_file_;
  int declared_line_;
};

// The thread's live local arrays, newest first, as an intrusive list (no destructor: arrays may
// outlive the thread_local storage of the thread that declared them).
inline ArrayState*& newest_local() {
  thread_local ArrayState* newest = nullptr;
  return newest;
}

inline void declare_local(ArrayState* array) {
  array->older = newest_local();
  newest_local() = array;
}

inline void forget_local(ArrayState* array) {
  for (ArrayState** link = &newest_local(); *link != nullptr; link = &(*link)->older) {
    if (*link == array) {
      *link = array->older;
      return;
    }
  }
}

// ROM views by name, shared by every translation unit and thread.
class RomRegistry {
 public:
  static RomRegistry& instance() {
    static RomRegistry* registry = new RomRegistry;  // never destroyed: ROM views may outlive it
    return *registry;
  }

  ArrayState* state(const char* name, std::initializer_list<int> extents) {
    std::lock_guard<std::mutex> lock(mutex_);
    ArrayState*& state = states_[name];
    if (state == nullptr) {
      state = new ArrayState(extents, "", 0);
      state->bind(name);
    }
    return state;
  }

  ArrayState* find(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = states_.find(name);
    return found != states_.end() ? found->second : nullptr;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, ArrayState*> states_;
};

// ---------------------------------------------------------------------------------------------------
// Element references: `array[i][j]` is a Ref<T, rank - 2>; the last subscript gives a Ref<T, 0>, which
// reads on conversion to T and writes on assignment.

struct Index {
  int at[kMaxRank];
  int depth;
  int offset;  // row-major element offset of the subscripts so far
  int line;    // of the access: where the first subscript is
};

// An array's first subscript, which notes the source line it is written on: an integer, or a register of
// a width of its own (ming::UInt).
struct Subscript {
  template <typename Integer>
  Subscript(const Integer& value, int line = __builtin_LINE())  // NOLINT: implicit on purpose
      : value(static_cast<int>(value)), line(line) {}
  int value;
  int line;
};

template <typename T, int Remaining>
class Ref {
 public:
  Ref(const ArrayState* array, T* data, const Index& index) : array_(array), data_(data), index_(index) {}

  Ref<T, Remaining - 1> operator[](int i) const {
    const int n = array_->extent(index_.depth);
    if (i < 0 || i >= n) {
      std::fprintf(stderr, "ming port check: error: %s: index %d of dimension %d out of range [0, %d)\n",
                   array_->name().c_str(), i, index_.depth + 1, n);
      std::fflush(stderr);
      std::abort();
    }
    Index next = index_;
    next.at[next.depth++] = i;
    next.offset = index_.offset * n + i;
    return Ref<T, Remaining - 1>(array_, data_, next);
  }

 private:
  const ArrayState* array_;
  T* data_;
  Index index_;
};

template <typename T>
class Ref<T, 0> {
  using Value = typename std::remove_const<T>::type;

 public:
  Ref(const ArrayState* array, T* data, const Index& index) : array_(array), data_(data), index_(index) {}
  Ref(const Ref&) = default;

  operator Value() const {
    array_->note(index_.at, false, index_.line);
    return data_[index_.offset];
  }

  Ref& operator=(const Value& value) {
    array_->note(index_.at, true, index_.line);
    data_[index_.offset] = value;
    return *this;
  }
  Ref& operator=(const Ref& other) { return *this = static_cast<Value>(other); }

  template <typename U> Ref& operator+=(const U& v) { return *this = static_cast<Value>(Value(*this) + v); }
  template <typename U> Ref& operator-=(const U& v) { return *this = static_cast<Value>(Value(*this) - v); }
  template <typename U> Ref& operator*=(const U& v) { return *this = static_cast<Value>(Value(*this) * v); }
  template <typename U> Ref& operator/=(const U& v) { return *this = static_cast<Value>(Value(*this) / v); }
  template <typename U> Ref& operator%=(const U& v) { return *this = static_cast<Value>(Value(*this) % v); }
  template <typename U> Ref& operator&=(const U& v) { return *this = static_cast<Value>(Value(*this) & v); }
  template <typename U> Ref& operator|=(const U& v) { return *this = static_cast<Value>(Value(*this) | v); }
  template <typename U> Ref& operator^=(const U& v) { return *this = static_cast<Value>(Value(*this) ^ v); }
  template <typename U> Ref& operator<<=(const U& v) { return *this = static_cast<Value>(Value(*this) << v); }
  template <typename U> Ref& operator>>=(const U& v) { return *this = static_cast<Value>(Value(*this) >> v); }
  Ref& operator++() { return *this += 1; }
  Ref& operator--() { return *this -= 1; }
  Value operator++(int) {
    const Value old = *this;
    *this = static_cast<Value>(old + 1);
    return old;
  }
  Value operator--(int) {
    const Value old = *this;
    *this = static_cast<Value>(old - 1);
    return old;
  }

 private:
  const ArrayState* array_;
  T* data_;
  Index index_;
};

template <typename T, int... N>
struct CArray {
  using type = T;
};
template <typename T, int N0, int... Rest>
struct CArray<T, N0, Rest...> {
  using type = typename CArray<T, Rest...>::type[N0];
};

template <int... N>
constexpr int element_count() {
  return (N * ...);
}

// ming::Array<T, N...> in check mode: a local array whose element accesses are counted.
template <typename T, int... N>
class Array {
  static_assert(sizeof...(N) >= 1 && sizeof...(N) <= kMaxRank, "ming::Array has 1 to 5 dimensions");
  static constexpr int kRank = static_cast<int>(sizeof...(N));

 public:
  // Where it is declared names it in reports until a pragma does.
  Array(const char* file = __builtin_FILE(), int line = __builtin_LINE()) : state_({N...}, file, line) {
    declare_local(&state_);
  }
  ~Array() { forget_local(&state_); }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  Ref<T, kRank - 1> operator[](Subscript i) { return Ref<T, kRank>(&state_, data_, Index{{}, 0, 0, i.line})[i.value]; }
  Ref<const T, kRank - 1> operator[](Subscript i) const {
    return Ref<const T, kRank>(&state_, data_, Index{{}, 0, 0, i.line})[i.value];
  }

 private:
  ArrayState state_;
  T data_[element_count<N...>()] = {};
};

// A constant table of the weights header, seen through the name of its plain C array.
template <typename T, int... N>
class Rom {
  static_assert(sizeof...(N) >= 1 && sizeof...(N) <= kMaxRank, "a ROM has 1 to 5 dimensions");
  static constexpr int kRank = static_cast<int>(sizeof...(N));

 public:
  template <typename Plain>
  Rom(const char* name, const Plain& data)
      : state_(RomRegistry::instance().state(name, {N...})),
        data_(static_cast<const T*>(static_cast<const void*>(&data))) {
    static_assert(std::is_same<Plain, typename CArray<T, N...>::type>::value,
                  "Rom<T, N...> views a const T[N0][N1]... array");
  }
  Rom(const Rom&) = delete;
  Rom& operator=(const Rom&) = delete;

  Ref<const T, kRank - 1> operator[](Subscript i) const {
    return Ref<const T, kRank>(state_, data_, Index{{}, 0, 0, i.line})[i.value];
  }

 private:
  const ArrayState* state_;
  const T* data_;
};

// ---------------------------------------------------------------------------------------------------
// Streams: one read and one write per iteration (ming_hls_stream.h calls note on each completed one).

class StreamPorts : public Resource {
 public:
  explicit StreamPorts(const std::string* stream_name) : stream_name_(stream_name) {
    ports_ = Ports::one_read_one_write;
  }
  ~StreamPorts() override { current_iteration().settle(this); }
  StreamPorts(const StreamPorts&) = delete;
  StreamPorts& operator=(const StreamPorts&) = delete;

  std::string name() const override { return *stream_name_; }
  std::string bank_text(std::int64_t) const override { return ""; }
  std::vector<std::int64_t> banks_of(const SiteBanks&) const override { return {0}; }

  // Every access is to a new address: each one counts.
  void note(bool write) const {
    Iteration& iteration = current_iteration();
    if (!iteration.open()) return;
    iteration.add(this, 0, iteration.size(), write);
#ifdef MING_TRACE_TOKENS
    std::fprintf(stderr, "ming trace: %s %s %s %lld\n", iteration.loop().function, stream_name_->c_str(),
                 write ? "write" : "read", iteration.number());
#endif
  }

 private:
  const std::string* stream_name_;
};

// ---------------------------------------------------------------------------------------------------
// Pragmas.

// A pragma's words: the directive, then `key=value` options and bare words.
class PragmaText {
 public:
  explicit PragmaText(const char* text) {
    std::string word;
    for (const char* c = text;; c++) {
      if (*c == ' ' || *c == '\t' || *c == '\0') {
        if (!word.empty()) add(word);
        word.clear();
        if (*c == '\0') break;
      } else {
        word += *c;
      }
    }
  }

  bool has(const std::string& key) const { return options_.count(key) != 0; }
  std::string option(const std::string& key, const std::string& fallback = "") const {
    const auto found = options_.find(key);
    return found != options_.end() ? found->second : fallback;
  }
  bool has_word(const std::string& word) const { return std::find(words_.begin(), words_.end(), word) != words_.end(); }

 private:
  static std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  void add(const std::string& word) {
    if (directive_.empty()) {
      directive_ = lower(word);
      return;
    }
    const std::size_t equals = word.find('=');
    if (equals == std::string::npos) {
      words_.push_back(lower(word));
    } else {
      const std::string key = lower(word.substr(0, equals)), value = word.substr(equals + 1);
      options_[key] = key == "type" ? lower(value) : value;
    }
  }

  std::string directive_;
  std::map<std::string, std::string> options_;
  std::vector<std::string> words_;
};

// The array `variable=NAME` names: the ROM view NAME, else the thread's newest local array (bound to
// NAME by this pragma if no pragma named it yet), else an older local array already named NAME.
inline ArrayState* named_array(const std::string& name, const Site& site) {
  if (ArrayState* rom = RomRegistry::instance().find(name)) return rom;
  ArrayState* newest = newest_local();
  if (newest == nullptr) misuse(site, "variable=" + name + " names no array: none is declared before it");
  if (newest->bound_name().empty()) {
    newest->bind(name);
    return newest;
  }
  for (ArrayState* array = newest; array != nullptr; array = array->older) {
    if (array->bound_name() == name) return array;
  }
  misuse(site, "variable=" + name + " names no array: the array declared last is " + newest->bound_name() +
                   " (declare each ming::Array right before its pragmas)");
}

// Pragma arguments arrive with their macros expanded, but a C++ constant's name cannot be evaluated.
inline int number(const PragmaText& pragma, const std::string& key, const Site& site) {
  const std::string text = pragma.option(key);
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') misuse(site, key + "=" + text + " is not a number");
  return static_cast<int>(value);
}

inline Split split_of(const PragmaText& pragma, const Site& site) {
  std::string type = pragma.option("type");
  for (const char* bare : {"complete", "cyclic", "block"}) {
    if (type.empty() && pragma.has_word(bare)) type = bare;
  }
  if (type.empty() || type == "complete") return Split::complete;
  if (type == "cyclic") return Split::cyclic;
  if (type == "block") return Split::block;
  misuse(site, "unknown type=" + type);
}

inline void apply_layout(const PragmaText& pragma, Layout layout, const Site& site) {
  ArrayState* array = named_array(pragma.option("variable"), site);
  DimensionLayout dimension;
  dimension.layout = layout;
  dimension.split = split_of(pragma, site);
  if (dimension.split != Split::complete) {
    if (!pragma.has("factor")) misuse(site, "a cyclic or block split needs factor=");
    dimension.factor = number(pragma, "factor", site);
    if (dimension.factor < 1) misuse(site, "factor must be positive");
  }
  const int dim = pragma.has("dim") ? number(pragma, "dim", site) : 1;
  if (dim < 0 || dim > array->rank()) {
    misuse(site, "dim=" + std::to_string(dim) + " but " + array->name() + " has " +
                     std::to_string(array->rank()) + " dimensions");
  }
  for (int d = 0; d < array->rank(); d++) {
    if (dim == 0 || d == dim - 1) array->set_layout(d, dimension);
  }
}

inline void apply_storage(const PragmaText& pragma, const Site& site) {
  const std::string type = pragma.option("type");
  if (type == "fifo") return;  // a stream's storage
  named_array(pragma.option("variable"), site)->set_ports(ports_of_storage(type));
}

// HLS_PRAGMA(x) in check mode: one of these per pragma, living as long as the enclosing block.
class Pragma {
 public:
  Pragma(const char* text, const char* function, const char* file, int line) {
    const Site site{text, function, file, line};
    if (starts_with_word(text, "pipeline")) {
      if (!turned_off(text)) opened_ = current_iteration().begin(this, site);
      return;
    }
    const bool partition = starts_with_word(text, "array_partition");
    const bool reshape = starts_with_word(text, "array_reshape");
    const bool storage = starts_with_word(text, "bind_storage");
    if (!partition && !reshape && !storage) return;
    const PragmaText pragma(text);
    if (!pragma.has("variable")) misuse(site, "no variable=");
    if (storage) {
      apply_storage(pragma, site);
    } else {
      apply_layout(pragma, partition ? Layout::partition : Layout::reshape, site);
    }
  }
  // The end of the loop body ends the iteration a PIPELINE pragma began.
  ~Pragma() {
    if (opened_) current_iteration().end();
  }
  Pragma(const Pragma&) = delete;
  Pragma& operator=(const Pragma&) = delete;

 private:
  // Without parsing the text: a PIPELINE or UNROLL pragma runs on every iteration.
  static bool starts_with_word(const char* text, const char* lower_word) {
    std::size_t n = 0;
    for (; lower_word[n] != '\0'; n++) {
      if (std::tolower(static_cast<unsigned char>(text[n])) != lower_word[n]) return false;
    }
    return text[n] == ' ' || text[n] == '\0';
  }

  // PIPELINE off: the loop is not pipelined.
  static bool turned_off(const char* text) {
    for (const char* at = std::strstr(text, " off"); at != nullptr; at = std::strstr(at + 1, " off")) {
      if (at[4] == ' ' || at[4] == '\0') return true;
    }
    return false;
  }

  bool opened_ = false;
};

}  // namespace ming_check

// Where the weights header keeps its plain tables under the check, their names going to the ROM views.
namespace ming_rom_data {}

#define MING_CHECK_CONCAT_(a, b) a##b
#define MING_CHECK_CONCAT(a, b) MING_CHECK_CONCAT_(a, b)
// A declaration, so that a PIPELINE pragma's iteration ends with its loop body.
#define MING_CHECK_PRAGMA(x) \
  const ming_check::Pragma MING_CHECK_CONCAT(ming_check_pragma_, __COUNTER__)(#x, __func__, __FILE__, __LINE__);

#endif  // MING_CHECK_H
